#!/usr/bin/env python3
"""Trains the demo Qwen3.5 model (with its MTP head) within a wall-clock budget, evaluates it on
held-out text and writes a Hugging Face checkpoint folder.

    python3 tools/train-demo/train.py --corpus OUT/corpus --tokenizer OUT/tokenizer \
        --out OUT/demo-model --budget-s 330

The learning-rate schedule runs on progress = max(elapsed / budget, tokens / (max_epochs x
corpus)), so the cosine decay ends exactly when either limit is reached, however fast the
device is. Validation documents are scored every tenth of the way; if the last weights score
worse than an earlier snapshot (over-fitting a small corpus), the best snapshot is exported.
The reported figures are on the held-out documents, after rounding to the export dtype.
"""
import argparse
import copy
import json
import math
import pathlib
import shlex
import sys
import time

import torch
import torch.nn.functional as F

import data
import evaluate
import export
import model as M
from chat_format import chat_text

PRESETS = {
    # About 7M parameters in the model and 0.7M in the MTP head; 15 MB in bf16.
    "demo": dict(hidden_size=256, intermediate_size=384, num_hidden_layers=8, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, linear_num_key_heads=2, linear_num_value_heads=4,
                 linear_key_head_dim=64, linear_value_head_dim=64),
    # For CPU tests: seconds per step on two cores.
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=32, linear_num_key_heads=1, linear_num_value_heads=2,
                 linear_key_head_dim=16, linear_value_head_dim=16),
}
SAMPLE_PROMPTS = [("text", "The President said that"), ("chat", "Tell me about Norway.")]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True, help="checkpoint folder to write")
    ap.add_argument("--preset", choices=PRESETS, default="demo")
    ap.add_argument("--budget-s", type=float, default=330, help="wall-clock seconds of training")
    ap.add_argument("--max-epochs", type=float, default=16)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: no limit)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=float, default=0.03, help="fraction of progress")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--chat-repeat", type=int, default=2, help="copies of the chat turns in the stream")
    ap.add_argument("--dtype", choices=export.DTYPES, default="bf16", help="export dtype")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--command", help="the command that reproduces this run, for the checkpoint's README "
                                      "(default: this train.py command)")
    return ap.parse_args()


def schedule(progress, warmup):
    """Linear warm-up, then cosine from 1 down to 0.1 of the peak."""
    if progress < warmup:
        return progress / warmup
    x = (progress - warmup) / (1 - warmup)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, x)))


def losses(model, x, y):
    h = model.hidden(x)
    loss = F.cross_entropy(model.logits(h).float().flatten(0, 1), y.flatten())
    # MTP row t (token t+1's embedding, hidden t) predicts token t+2 = y[:, t+1].
    m = model.logits(model.mtp_hidden(x, h)).float()
    return loss, F.cross_entropy(m.flatten(0, 1), y[:, 1:].flatten())


def count(model, prefix=None):
    return sum(p.numel() for n, p in model.named_parameters() if prefix is None or n.startswith(prefix))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    corpus, tok_dir = pathlib.Path(args.corpus), pathlib.Path(args.tokenizer)
    enc = data.TextEncoder(tok_dir / "tokenizer.json")
    ids = {t: enc.id(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")}

    t_load = time.time()
    train_docs = data.documents(corpus / "train.txt")
    train = data.stream(enc, train_docs + data.chat_texts(corpus, args.chat_repeat), seed=args.seed).to(dev)
    valid = data.stream(enc, data.documents(corpus / "valid.txt")).to(dev)
    held_docs = data.documents(corpus / "heldout.txt")
    held = data.stream(enc, held_docs).to(dev)
    held_bytes = sum(len(d.encode()) for d in held_docs)
    bytes_per_token = held_bytes / (held.numel() - len(held_docs))
    print(f"tokens: train {train.numel():,d} (with chat turns), valid {valid.numel():,d}, held out {held.numel():,d} "
          f"({bytes_per_token:.2f} bytes/token); encoded in {time.time() - t_load:.1f} s", flush=True)

    cfg = M.Qwen35Config(vocab_size=(enc.size + 63) // 64 * 64, **PRESETS[args.preset])
    model = M.Qwen35ForCausalLM(cfg, dropout=args.dropout)
    M.init_weights(model, args.seed)
    model.to(dev).train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=dev.type == "cuda")
    except TypeError:  # torch without fused AdamW
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))
    print(f"model: {count(model) - count(model, 'mtp.'):,d} parameters + MTP head {count(model, 'mtp.'):,d}; "
          f"{cfg.layer_types}", flush=True)

    gen = torch.Generator(device=dev).manual_seed(args.seed)
    max_tokens = args.max_epochs * train.numel()
    step, seen, curve, best = 0, 0, [], None
    next_eval = 0.1
    t0 = time.time()
    while True:
        progress = max((time.time() - t0) / args.budget_s, seen / max_tokens)
        if progress >= 1 or (args.max_steps and step >= args.max_steps):
            break
        for g in opt.param_groups:
            g["lr"] = args.lr * schedule(progress, args.warmup)
        x, y = data.batches(train, args.batch, args.seq, gen)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss, mtp_loss = losses(model, x, y)
            total = loss + args.mtp_weight * mtp_loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += x.numel()
        if step % 50 == 0 or step == 1:
            el = time.time() - t0
            print(f"step {step:5d} progress {progress:.3f} loss {loss.item():.3f} mtp {mtp_loss.item():.3f} "
                  f"lr {opt.param_groups[0]['lr']:.2e} {seen / el:,.0f} tok/s", flush=True)
        if progress >= next_eval:
            next_eval += 0.1
            v = evaluate.evaluate(model, valid, args.seq, args.batch, max_tokens=65536)
            curve.append({"step": step, "progress": round(progress, 3), "seconds": round(time.time() - t0, 1),
                          "train_loss": round(loss.item(), 4), "valid_loss": round(v["loss"], 4)})
            print(f"  valid loss {v['loss']:.3f} (ppl {v['ppl']:.1f}) mtp agreement {v['mtp_agreement']:.3f}", flush=True)
            if best is None or v["loss"] < best[0]:
                best = (v["loss"], step, copy.deepcopy(model.state_dict()))
    train_seconds = time.time() - t0

    final = evaluate.evaluate(model, valid, args.seq, args.batch, max_tokens=65536)
    chosen = step
    if best is not None and best[0] < final["loss"]:
        print(f"restoring step {best[1]}: valid loss {best[0]:.3f} < final {final['loss']:.3f}", flush=True)
        model.load_state_dict(best[2])
        chosen = best[1]
    export.round_to(model, args.dtype)
    model.eval()
    h = evaluate.evaluate(model, held, args.seq, args.batch)
    h["bits_per_byte"] = h["loss"] / math.log(2) / bytes_per_token
    print("held out: " + ", ".join(f"{k} {v:.4g}" for k, v in h.items()), flush=True)

    samples = []
    for mode, prompt in SAMPLE_PROMPTS:
        text = prompt if mode == "text" else chat_text(prompt)
        for temp in (0.0, 0.7):
            out = evaluate.generate(model, enc.encode(text), 48, stop_ids=(ids["<|im_end|>"], ids["<|endoftext|>"]),
                                    temperature=temp, top_p=0.9, seed=args.seed)
            samples.append({"prompt": prompt, "mode": f"{mode}, " + ("greedy" if temp == 0 else f"temperature {temp}"),
                            "text": enc.decode(out)})
            print(f"sample [{samples[-1]['mode']}] {prompt!r} -> {samples[-1]['text']!r}", flush=True)

    out = pathlib.Path(args.out)
    export.write_checkpoint(model, cfg, out, tok_dir, ids, args.dtype)
    metrics = {
        "model": {"preset": args.preset, "params_total": count(model), "params_trunk": count(model) - count(model, "mtp."),
                  "params_mtp": count(model, "mtp."), "layers": cfg.num_hidden_layers,
                  "layer_pattern": f"{cfg.layer_types.count('linear_attention')} Gated DeltaNet, "
                                   f"{cfg.layer_types.count('full_attention')} gated attention",
                  "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
                  "attention": f"{cfg.num_attention_heads} heads / {cfg.num_key_value_heads} KV heads x {cfg.head_dim}",
                  "gated_deltanet": f"{cfg.linear_num_key_heads} key / {cfg.linear_num_value_heads} value heads x "
                                    f"{cfg.linear_key_head_dim}",
                  "vocab_size": cfg.vocab_size, "partial_rotary_factor": cfg.partial_rotary_factor,
                  "dtype": export.DTYPES[args.dtype][1]},
        "training": {"steps": step, "exported_step": chosen, "batch": args.batch, "seq": args.seq,
                     "tokens_seen": seen, "train_tokens": train.numel(), "epochs": seen / train.numel(),
                     "seconds": train_seconds, "lr": args.lr, "mtp_weight": args.mtp_weight,
                     "dropout": args.dropout, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                     "torch": torch.__version__, "valid_curve": curve},
        "heldout": h,
        "samples": samples,
        "corpus": {"train_documents": len(train_docs), "heldout_documents": len(held_docs), "heldout_bytes": held_bytes,
                   "bytes_per_token": bytes_per_token},
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    stats = json.loads((corpus / "stats.json").read_text()) if (corpus / "stats.json").exists() else {}
    command = args.command or "python3 tools/train-demo/train.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    (out / "README.md").write_text(export.model_card(metrics, stats, command))
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.1f} MB)", flush=True)


if __name__ == "__main__":
    main()
