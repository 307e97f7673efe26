#!/usr/bin/env python3
"""ninfer-bench and Hugging Face transformers side by side, on the same model shape.

Both get random bfloat16 weights of a ninfer-bench shape preset (the config comes from
`ninfer-bench --preset P --print-config`, so the two cannot disagree about the shape). For each
preset: ninfer-bench runs first in its own process (its --json report is kept), then
transformers builds the model on the GPU and times a prefill of the same prompt length and
greedy decode steps at context ~0 with a KV cache, batch 1. Prints one table with both.

  python3 tools/bench-transformers/bench_transformers.py --ninfer-bench PATH/ninfer-bench \
      --presets qwen3-8b,qwen3_5-27b --prompt-length 4096 --decode-steps 32

Needs torch and transformers (the H200 image has both); it never downloads anything.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time


def ninfer(bench, preset, prompt, steps, repeats):
    cmd = [bench, "--preset", preset, "--device", "cuda", "--prompt-lengths", str(prompt), "--contexts", "0",
           "--batches", "1", "--decode-steps", str(steps), "--repeats", str(repeats), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["results"]
    prefill = next(r for r in rows if r["phase"] == "prefill")
    decode = next(r for r in rows if r["phase"] == "decode")
    return prefill["tok_s"], decode["tok_s"], prefill["roofline_tok_s"], decode["roofline_tok_s"]


def transformers_rates(bench, preset, prompt, steps, repeats):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg_text = subprocess.run([bench, "--preset", preset, "--print-config"], check=True, capture_output=True,
                              text=True).stdout
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/config.json", "w") as f:
            f.write(cfg_text)
        cfg = AutoConfig.from_pretrained(d)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model.eval()
    vocab = cfg.vocab_size
    ids = torch.randint(0, min(vocab, 151643), (1, prompt), device="cuda")

    def timed(fn):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    with torch.inference_mode():
        model(ids, use_cache=True)  # warm-up
        prefill = [prompt / timed(lambda: model(ids, use_cache=True)) for _ in range(repeats)]

        def decode():
            out = model(ids[:, :1], use_cache=True)
            cache = out.past_key_values
            nxt = out.logits[:, -1:].argmax(-1)
            for _ in range(steps):
                out = model(nxt, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)

        decode()  # warm-up
        rates = [steps / timed(decode) for _ in range(repeats)]
    del model
    torch.cuda.empty_cache()
    return statistics.median(prefill), statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ninfer-bench", required=True, help="path of the ninfer-bench binary")
    ap.add_argument("--presets", default="qwen3-8b,qwen3_5-27b")
    ap.add_argument("--prompt-length", type=int, default=4096)
    ap.add_argument("--decode-steps", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = ap.parse_args()
    rows = []
    for p in a.presets.split(","):
        print(f"[{p}] ninfer-bench ...", file=sys.stderr, flush=True)
        n_pre, n_dec, roof_pre, roof_dec = ninfer(a.ninfer_bench, p, a.prompt_length, a.decode_steps, a.repeats)
        print(f"[{p}] transformers ...", file=sys.stderr, flush=True)
        t_pre, t_dec = transformers_rates(a.ninfer_bench, p, a.prompt_length, a.decode_steps, a.repeats)
        rows.append({"preset": p, "prompt_length": a.prompt_length, "ninfer_prefill_tok_s": n_pre,
                     "transformers_prefill_tok_s": t_pre, "prefill_roofline_tok_s": roof_pre,
                     "ninfer_decode_tok_s": n_dec, "transformers_decode_tok_s": t_dec, "decode_roofline_tok_s": roof_dec})
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'preset':<14} {'phase':<8} {'ninfer tok/s':>13} {'transformers':>13} {'speed-up':>9} {'roofline':>9}")
    for r in rows:
        for phase in ("prefill", "decode"):
            n, t, roof = r[f"ninfer_{phase}_tok_s"], r[f"transformers_{phase}_tok_s"], r[f"{phase}_roofline_tok_s"]
            print(f"{r['preset']:<14} {phase:<8} {n:>13.1f} {t:>13.1f} {n / t:>8.1f}x {roof:>9.1f}")


if __name__ == "__main__":
    main()
