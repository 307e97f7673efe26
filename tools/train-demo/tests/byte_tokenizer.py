"""A merge-free byte-level tokenizer.json (every byte its own token, plus the demo's added tokens)
for tests on machines without Hugging Face `tokenizers`: data.TextEncoder encodes it exactly, and
it has the shape of the file train_tokenizer.py writes, so ninfer loads it too."""
import json
import sys
import pathlib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import chat_format  # noqa: E402
from data import _byte_alphabet  # noqa: E402

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]


def write(folder):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in enumerate(SPECIAL)]
    vocab = {t: i for i, t in enumerate(SPECIAL)}
    for c in _byte_alphabet():
        vocab[c] = len(vocab)
    for t in THINK:
        added.append({"id": len(vocab), "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": False})
        vocab[t] = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    spec = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\s+|\S+"}, "behavior": "Isolated", "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False))
    (folder / "tokenizer_config.json").write_text(json.dumps(chat_format.tokenizer_config(), indent=2))


if __name__ == "__main__":
    write(sys.argv[1])
