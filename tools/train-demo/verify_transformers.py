#!/usr/bin/env python3
"""Checks the exported checkpoint with transformers and writes ninfer's reference for it.

    python3 tools/train-demo/verify_transformers.py --checkpoint OUT/demo-model --corpus OUT/corpus

1. transformers (AutoModelForCausalLM, float64, eager attention) loads the folder with no
   missing or mismatched tensor (the mtp.* tensors are the only unexpected ones, which
   Qwen3_5ForCausalLM ignores), and its logits on held-out text equal model.py's on the same
   weights within 1e-3: the export is the architecture transformers knows.
2. reference.json / reference.safetensors in the checkpoint folder, in the format of
   tests/fixtures (tests/models/model_test_env.hpp reads it): prompt ids, transformers' greedy
   continuation and top-2 margins, teacher-forced float32 logits of the prompt and of prompt +
   continuation, computed in float64 from the exported weights.
3. AutoTokenizer loads tokenizer.json / tokenizer_config.json, encodes as `tokenizers` does, and
   its chat template renders exactly the text the model was trained on (chat_format.py).

Results go to metrics.json ("transformers") and the README's last section. Exits 1 if a check
fails (after writing everything).
"""
import argparse
import json
import pathlib
import sys

import torch

import data
import model as M
import safetensors_io
from chat_format import chat_text

# model.py in float64 against transformers in float64: what is left is transformers' own float32
# Gated DeltaNet and norms, as on the fixtures (3.5e-4 / 4.1e-4 there); the fixtures README's
# float32 bound.
LOGITS_ABS = 1e-3
GREEDY_STEPS = 12


def load_model_py(ckpt):
    cfg = M.Qwen35Config.from_hf(json.loads((ckpt / "config.json").read_text()))
    m = M.Qwen35ForCausalLM(cfg).double().eval()
    m.load_state_dict({k: v.double() for k, v in safetensors_io.load(ckpt / "model.safetensors").items()})
    return m


@torch.no_grad()
def greedy(hf, prompt, steps):
    """transformers' greedy continuation, the whole prefix recomputed each step (no cache path)."""
    ids, margins = list(prompt), []
    for _ in range(steps):
        logits = hf(torch.tensor([ids]), use_cache=False).logits[0, -1]
        top = logits.topk(2)
        ids.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
    return ids[len(prompt):], margins


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--corpus", required=True)
    args = ap.parse_args()
    ckpt = pathlib.Path(args.checkpoint)
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report, failures = {"transformers": transformers.__version__, "torch": torch.__version__}, []

    hf, info = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float64, attn_implementation="eager",
                                                    output_loading_info=True)
    hf.eval()
    report["class"] = type(hf).__name__
    report["missing"] = sorted(info.get("missing_keys", []))
    report["mismatched"] = [str(x) for x in info.get("mismatched_keys", [])]
    report["unexpected_not_mtp"] = sorted(k for k in info.get("unexpected_keys", []) if not k.startswith("mtp."))
    if report["missing"] or report["mismatched"] or report["unexpected_not_mtp"]:
        failures.append(f"loading: {report}")

    ours = load_model_py(ckpt)
    enc = data.TextEncoder(ckpt / "tokenizer.json")
    held = data.stream(enc, data.documents(pathlib.Path(args.corpus) / "heldout.txt"))
    windows = held[: 2 * 256].view(2, 256)
    with torch.no_grad():
        diff = (hf(windows, use_cache=False).logits - ours(windows)).abs().max().item()
    report["heldout_logits_max_abs_diff"] = diff
    print(f"transformers vs model.py on 2 x 256 held-out tokens: max |logit difference| {diff:.2e}")
    if not diff <= LOGITS_ABS:
        failures.append(f"logits differ by {diff:.2e} > {LOGITS_ABS}")

    # ninfer's reference: a held-out sentence start and a chat prompt.
    cases, tensors = [], {}
    prompts = [enc.encode(data.documents(pathlib.Path(args.corpus) / "heldout.txt")[0])[:12],
               enc.encode(chat_text("Tell me about Norway."))]
    for i, prompt in enumerate(prompts):
        cont, margins = greedy(hf, prompt, GREEDY_STEPS)
        with torch.no_grad():
            full = hf(torch.tensor([prompt + cont]), use_cache=False).logits[0]
        tensors[f"case{i}.prompt_logits"] = full[: len(prompt)].float()
        tensors[f"case{i}.full_logits"] = full.float()
        cases.append({"prompt_ids": prompt, "greedy_ids": cont, "greedy_top2_margin": margins})
        print(f"case {i}: {enc.decode(prompt)!r} -> {enc.decode(cont)!r}")
    (ckpt / "reference.json").write_text(json.dumps({
        "name": ckpt.name, "kind": "qwen3_5", "transformers": transformers.__version__, "torch": torch.__version__,
        "precision": "float64 reference from the exported weights", "cases": cases}) + "\n")
    safetensors_io.save(tensors, ckpt / "reference.safetensors")

    try:
        tok = AutoTokenizer.from_pretrained(str(ckpt))
        report["tokenizer_class"] = type(tok).__name__
        samples = [d[:2000] for d in data.documents(pathlib.Path(args.corpus) / "heldout.txt")[:3]]
        samples.append(chat_text("Hi there.", "Hello.", think_block=True))
        if any(tok.encode(s, add_special_tokens=False) != enc.encode(s) for s in samples):
            failures.append("AutoTokenizer encodes differently from tokenizers")
        msgs = [{"role": "user", "content": "Tell me about Norway."}]
        for think, kwargs in ((False, {}), (True, {"enable_thinking": False})):
            got = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True, **kwargs)
            if got != chat_text("Tell me about Norway.", think_block=think):
                failures.append(f"chat template{' (enable_thinking=False)' if think else ''} renders {got!r}")
    except Exception as e:  # noqa: BLE001 -- reported with the other checks, after the reference is written
        failures.append(f"AutoTokenizer: {type(e).__name__}: {e}")
    report["failures"] = failures

    metrics_path = ckpt / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    metrics["transformers"] = report
    metrics_path.write_text(json.dumps(metrics, indent=2) + "\n")
    readme = ckpt / "README.md"
    if readme.exists():
        verdict = "agree" if not failures else "DISAGREE: " + "; ".join(failures)
        readme.write_text(readme.read_text() + f"""
## Checked against transformers

transformers {transformers.__version__} loads this folder as `{report['class']}` (the `mtp.*` tensors
aside) and its float64 logits on 2 x 256 held-out tokens differ from tools/train-demo/model.py's by
at most {diff:.1e}; tokenizer and chat template {verdict}. `reference.json` / `reference.safetensors`
hold transformers' greedy continuations and logits for ninfer's tests (tests/fixtures/README.md).
""")
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
