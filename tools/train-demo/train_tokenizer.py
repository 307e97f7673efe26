#!/usr/bin/env python3
"""A byte-level BPE tokenizer for the demo model, trained with Hugging Face `tokenizers`.

    python3 tools/train-demo/train_tokenizer.py --corpus OUT/corpus --out OUT/tokenizer --vocab 8192

Writes tokenizer.json and tokenizer_config.json in the form Qwen's ship (and ninfer reads,
docs/tokenizer.md): NFC, Qwen's pre-tokenizer regex (contractions, letter runs, single digits,
punctuation runs, newline and space rules) then ByteLevel without its own regex, BPE without
byte fallback, ByteLevel decoder. Added tokens: <|endoftext|>, <|im_start|>, <|im_end|>
(special) and <think>, </think> (not special, as in Qwen3), none with lstrip/rstrip/single_word.
The ids of the whole vocabulary, added tokens included, are exactly 0 .. --vocab - 1.
"""
import argparse
import json
import pathlib

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from chat_format import chat_text, tokenizer_config

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]
# Qwen2/Qwen3's split: the same regex ninfer runs in PCRE2 (core/tokenizer/regex_split.cpp).
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def build(texts, vocab):
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab - len(THINK), min_frequency=2, show_progress=False,
                                  special_tokens=[AddedToken(s, special=True, normalized=False) for s in SPECIAL],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK])
    return tok


def check(tok, vocab):
    """What ninfer and the trainer rely on; a failure here stops the run before training."""
    size = tok.get_vocab_size(with_added_tokens=True)
    if size != vocab:
        raise SystemExit(f"train_tokenizer: vocabulary has {size} ids, expected {vocab}")
    ids = {t: tok.token_to_id(t) for t in SPECIAL + THINK}
    if any(i is None for i in ids.values()):
        raise SystemExit(f"train_tokenizer: added tokens missing: {ids}")
    sample = chat_text("Tell me about Norway.", "Norway is a country in Europe.", think_block=True)
    enc = tok.encode(sample, add_special_tokens=False)
    if enc.ids[0] != ids["<|im_start|>"] or ids["<think>"] not in enc.ids:
        raise SystemExit("train_tokenizer: special tokens in text are not recognised")
    if tok.decode(enc.ids, skip_special_tokens=False) != sample:
        raise SystemExit("train_tokenizer: decode(encode(text)) != text")
    data = json.loads(tok.to_str())
    for t in data["added_tokens"]:
        if t["lstrip"] or t["rstrip"] or t["single_word"]:
            raise SystemExit(f"train_tokenizer: {t['content']} sets lstrip/rstrip/single_word (ninfer refuses it)")
    if data["model"].get("byte_fallback"):
        raise SystemExit("train_tokenizer: byte_fallback is set (ninfer refuses it)")
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="prepare_corpus.py's output folder")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=8192)
    args = ap.parse_args()
    corpus = pathlib.Path(args.corpus)
    # Whole documents, so the merges see the newlines between paragraphs too.
    docs = [d for d in (corpus / "train.txt").read_text(encoding="utf-8").split("\n\n") if d.strip()]
    tok = build(docs, args.vocab)
    ids = check(tok, args.vocab)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2) + "\n")
    held = (corpus / "heldout.txt").read_text(encoding="utf-8")
    n = len(tok.encode(held, add_special_tokens=False).ids)
    print(f"tokenizer: {args.vocab} ids ({ids}); held-out text {len(held.encode()):,d} bytes -> {n:,d} tokens "
          f"({len(held.encode()) / n:.2f} bytes/token); wrote {out}/tokenizer.json")


if __name__ == "__main__":
    main()
