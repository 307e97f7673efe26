"""The exported checkpoint in ninfer: a small random model written by export.write_checkpoint (bf16,
MTP head included) must load in ninfer-run and give model.py's log-probabilities at every prompt
position and greedy step, and its greedy tokens.

Needs a built ninfer-run: $NINFER_RUN, else build/bin or build-cpu/bin of the repository
(skipped when there is none).
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import byte_tokenizer  # noqa: E402
import export  # noqa: E402
import model as M  # noqa: E402
import safetensors_io  # noqa: E402

ROOT = HERE.parents[2]
# ninfer's float32 CPU plugin against model.py in float64 on the same bf16 weights: the fixtures
# README's float32 bound on logits, applied to log-probabilities.
LOGPROB_ABS = 1e-3
# A greedy step whose top-2 margin is below this may flip on float32 rounding (fixtures README).
GREEDY_MARGIN = 1e-2


def ninfer_run():
    for p in (os.environ.get("NINFER_RUN"), ROOT / "build" / "bin" / "ninfer-run", ROOT / "build-cpu" / "bin" / "ninfer-run"):
        if p and pathlib.Path(p).is_file():
            return str(p)
    return None


def random_model(vocab):
    cfg = M.Qwen35Config(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, linear_num_key_heads=1,
                         linear_num_value_heads=2, linear_key_head_dim=16, linear_value_head_dim=16)
    m = M.Qwen35ForCausalLM(cfg)
    M.init_weights(m, seed=3)
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        # Larger than a fresh model's, so the logits of the tied head spread over several units.
        m.model.embed_tokens.weight.mul_(4)
        for name, p in m.named_parameters():
            if p.dim() == 1 and not name.endswith(("A_log", "dt_bias")):
                p.add_(torch.randn(p.shape, generator=gen) * 0.2)
    return cfg, m


@unittest.skipIf(ninfer_run() is None, "no ninfer-run built (set NINFER_RUN)")
class NinferLoadsTheExport(unittest.TestCase):
    def test_greedy_ids_and_logprobs_match_model_py(self):
        with tempfile.TemporaryDirectory() as d:
            tok = pathlib.Path(d) / "tok"
            byte_tokenizer.write(tok)
            ids = {t["content"]: t["id"] for t in json.loads((tok / "tokenizer.json").read_text())["added_tokens"]}
            cfg, m = random_model(320)
            ckpt = pathlib.Path(d) / "ckpt"
            export.write_checkpoint(m, cfg, ckpt, tok, ids, "bf16")
            names = safetensors_io.load(ckpt / "model.safetensors")
            self.assertIn("mtp.fc.weight", names)
            self.assertNotIn("lm_head.weight", names)

            # model.py in float64 on the exported (bf16) weights, teacher-forced over prompt + greedy ids.
            back = M.Qwen35ForCausalLM(M.Qwen35Config.from_hf(json.loads((ckpt / "config.json").read_text()))).double()
            back.load_state_dict({k: v.double() for k, v in names.items()})
            back.eval()
            prompt = [84, 104, 101, 35, 119, 107, 104, 104, 111]
            out = subprocess.run([ninfer_run(), "--checkpoint", str(ckpt), "--prompt-ids", ",".join(map(str, prompt)),
                                  "--greedy", "--max-new", "12", "--ignore-eos", "--json", "--logprobs", "3", "--echo",
                                  "--dtype", "float32", "--kv-dtype", "float32", "--device", "cpu"],
                                 check=True, capture_output=True, text=True).stdout
            got = json.loads(out)
            # Row i of prompt_top_logprobs follows prompt[0..i]; generated step j follows prompt + generated[:j].
            rows = [(i, top) for i, top in enumerate(got["prompt_top_logprobs"])]
            rows += [(len(prompt) - 1 + j, top) for j, top in enumerate(got["generated_top_logprobs"])]
            with torch.no_grad():
                want = torch.log_softmax(back(torch.tensor([prompt + got["generated_ids"]]))[0], -1)
            self.assertEqual(len(rows), len(prompt) + 12)
            worst = 0.0
            for r, top in rows:
                for token, lp in top:
                    self.assertAlmostEqual(lp, want[r, token].item(), delta=LOGPROB_ABS, msg=f"row {r} token {token}")
                    worst = max(worst, abs(lp - want[r, token].item()))
                best = want[r].topk(2)
                if r >= len(prompt) - 1 and best.values[0] - best.values[1] > GREEDY_MARGIN:
                    self.assertEqual(top[0][0], int(best.indices[0]), f"row {r}")
            print(f"\nninfer vs model.py: max |log-probability difference| {worst:.2e} over {len(rows)} rows",
                  file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
