"""model.py against transformers: the Qwen3.5 fixtures (made by transformers 5.17, float64 reference
from float32 weights) loaded into model.py must give the fixture's logits, and the chunked Gated
DeltaNet must equal its one-token-at-a-time definition.

    python3 -m unittest discover -s tools/train-demo/tests -v     (needs torch; CPU is enough)
"""
import json
import os
import pathlib
import sys
import tempfile
import unittest

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import model as M  # noqa: E402
import safetensors_io  # noqa: E402

ROOT = HERE.parents[2]
FIXTURES = [pathlib.Path(os.environ.get("NINFER_FIXTURES", ROOT / "tests" / "fixtures")) / n
            for n in ("tiny-qwen3_5", "tiny-qwen3_5-long")]

# The fixtures README's float32 bound: max |logit - reference| over a row. model.py runs in
# float64 here, so what remains is transformers' own float32 Gated DeltaNet and norms inside
# its float64 reference, which stays below 1e-3 on every row but the one ill-conditioned row
# of tiny-qwen3_5-long that docs/models.md explains (held to its measured float32 spread there).
FIXTURE_LOGITS_ABS = 1e-3
ILL_CONDITIONED = {("tiny-qwen3_5-long", 0, 62): 3.0e-3}
# Chunked vs recurrent Gated DeltaNet in float64: the same sums in another order.
CHUNKED_VS_RECURRENT_F64 = 1e-10


def load_fixture_model(folder):
    cfg = M.Qwen35Config.from_hf(json.loads((folder / "config.json").read_text()))
    cfg.mtp_num_hidden_layers = 0
    m = M.Qwen35ForCausalLM(cfg).double().eval()
    m.load_state_dict({k: v.double() for k, v in safetensors_io.load(folder / "model.safetensors").items()})
    return m


class FixtureLogits(unittest.TestCase):
    def test_state_dict_names_are_the_fixture_names(self):
        folder = FIXTURES[0]
        cfg = M.Qwen35Config.from_hf(json.loads((folder / "config.json").read_text()))
        cfg.mtp_num_hidden_layers = 0
        ours = {k: list(v.shape) for k, v in M.Qwen35ForCausalLM(cfg).state_dict().items()}
        theirs = {k: list(v.shape) for k, v in safetensors_io.load(folder / "model.safetensors").items()}
        self.assertEqual(ours, theirs)

    def test_prompt_and_full_logits_match_the_fixtures(self):
        for folder in FIXTURES:
            m = load_fixture_model(folder)
            ref = json.loads((folder / "reference.json").read_text())
            logits = safetensors_io.load(folder / "reference.safetensors")
            worst = 0.0
            for i, case in enumerate(ref["cases"]):
                ids = case["prompt_ids"] + case["greedy_ids"]
                with torch.no_grad():
                    got = m(torch.tensor([ids]))[0]
                for key, rows in (("prompt_logits", len(case["prompt_ids"])), ("full_logits", len(ids))):
                    want = logits[f"case{i}.{key}"].double()
                    self.assertEqual(list(want.shape), [rows, m.cfg.vocab_size])
                    diff = (got[:rows] - want).abs().amax(-1)
                    for r in range(rows):
                        tol = ILL_CONDITIONED.get((folder.name, i, r), FIXTURE_LOGITS_ABS)
                        self.assertLessEqual(diff[r].item(), tol, f"{folder.name} case {i} {key} row {r}")
                        if (folder.name, i, r) not in ILL_CONDITIONED:
                            worst = max(worst, diff[r].item())
            print(f"\n{folder.name}: max |logit - reference| {worst:.2e}", file=sys.stderr)


class GatedDeltaRule(unittest.TestCase):
    def test_chunked_equals_recurrent(self):
        torch.manual_seed(0)
        b, h, dk, dv = 2, 3, 8, 5
        for n, chunk in ((1, 4), (7, 4), (16, 4), (37, 8), (70, 64)):
            q = M.l2norm(torch.randn(b, h, n, dk, dtype=torch.float64)) * dk ** -0.5
            k = M.l2norm(torch.randn(b, h, n, dk, dtype=torch.float64))
            v = torch.randn(b, h, n, dv, dtype=torch.float64)
            g = -torch.rand(b, h, n, dtype=torch.float64) * 3
            beta = torch.rand(b, h, n, dtype=torch.float64)
            want = M.gated_delta_rule_recurrent(q, k, v, g, beta)
            got = M.gated_delta_rule_chunked(q, k, v, g, beta, chunk=chunk)
            self.assertLess((got - want).abs().max().item(), CHUNKED_VS_RECURRENT_F64, f"n={n} chunk={chunk}")

    def test_gradients_flow_through_the_chunked_form(self):
        torch.manual_seed(1)
        shape = (1, 2, 20, 4)
        q, k, v = (torch.randn(shape, dtype=torch.float64, requires_grad=True) for _ in range(3))
        g = torch.full((1, 2, 20), -0.1, dtype=torch.float64, requires_grad=True)
        beta = torch.full((1, 2, 20), 0.5, dtype=torch.float64, requires_grad=True)
        def grads(rule):
            out = rule(M.l2norm(q), M.l2norm(k), v, g, beta)
            return torch.autograd.grad((out * out).sum(), (q, k, v, g, beta))

        ga = grads(lambda *a: M.gated_delta_rule_chunked(*a, chunk=8))
        gb = grads(M.gated_delta_rule_recurrent)
        for x, y in zip(ga, gb):
            self.assertLess((x - y).abs().max().item(), 1e-9)


class MtpLayout(unittest.TestCase):
    def test_mtp_tensors_have_qwen3_5_names(self):
        cfg = M.Qwen35Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=16, linear_num_key_heads=1,
                             linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8)
        names = {k: tuple(v.shape) for k, v in M.Qwen35ForCausalLM(cfg).state_dict().items() if k.startswith("mtp.")}
        self.assertEqual(names["mtp.fc.weight"], (32, 64))
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            self.assertEqual(names[f"mtp.{n}.weight"], (32,))
        for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            self.assertIn(f"mtp.layers.0.self_attn.{n}.weight", names)
        for n in ("input_layernorm", "post_attention_layernorm", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            self.assertIn(f"mtp.layers.0.{n}.weight", names)
        self.assertEqual(len(names), 15)
        self.assertNotIn("lm_head.weight", M.Qwen35ForCausalLM(cfg).state_dict())

    def test_mtp_row_t_reads_token_t_plus_1_and_hidden_t(self):
        cfg = M.Qwen35Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=16, linear_num_key_heads=1,
                             linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8)
        m = M.Qwen35ForCausalLM(cfg).double().eval()
        M.init_weights(m)
        ids = torch.randint(0, 64, (1, 10))
        with torch.no_grad():
            h = m.hidden(ids)
            full = m.mtp_hidden(ids, h)
            # Changing token 6 may change MTP rows >= 5 only (row 5 reads it as its next token).
            ids2 = ids.clone()
            ids2[0, 6] = (ids[0, 6] + 1) % 64
            changed = (m.mtp_hidden(ids2, m.hidden(ids2)) - full).abs().amax(-1)[0]
        self.assertEqual(changed[:5].max().item(), 0.0)
        self.assertGreater(changed[5].item(), 0.0)


class SafetensorsRoundTrip(unittest.TestCase):
    def test_bf16_and_f32_round_trip(self):
        t = {"a": torch.randn(3, 5).to(torch.bfloat16), "b": torch.randn(7), "c": torch.randn(2, 1, 3)}
        with tempfile.TemporaryDirectory() as d:
            safetensors_io.save(t, f"{d}/x.safetensors")
            back = safetensors_io.load(f"{d}/x.safetensors")
        for k in t:
            self.assertEqual(back[k].dtype, t[k].dtype)
            self.assertTrue(torch.equal(back[k], t[k]))


if __name__ == "__main__":
    unittest.main()
