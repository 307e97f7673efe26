"""Token streams for training and evaluation.

Text is encoded with Hugging Face `tokenizers` from the tokenizer.json that train_tokenizer.py
wrote. Where `tokenizers` is not installed (the CPU-only tests), a tokenizer.json without merges
is still encoded exactly: each added token where it occurs, every other byte as its own token.
"""
import json
import pathlib
import random
import re
import unicodedata

import torch

from chat_format import chat_text


class TextEncoder:
    def __init__(self, tokenizer_json):
        self.path = str(tokenizer_json)
        spec = json.loads(pathlib.Path(tokenizer_json).read_text(encoding="utf-8"))
        self.added = {t["content"]: t["id"] for t in spec["added_tokens"]}
        self.size = max(list(spec["model"]["vocab"].values()) + list(self.added.values())) + 1  # ids 0 .. size-1
        try:
            from tokenizers import Tokenizer
            self._tok = Tokenizer.from_file(self.path)
        except ImportError:
            if spec["model"]["merges"]:
                raise SystemExit("data.py: `tokenizers` is needed for a tokenizer with merges")
            self._tok = None
            self._byte_ids = [spec["model"]["vocab"][c] for c in _byte_alphabet()]
            self._id_byte = {i: b for b, i in enumerate(self._byte_ids)}
            self._id_added = {i: t for t, i in self.added.items()}
            alternatives = "|".join(re.escape(t) for t in sorted(self.added, key=len, reverse=True))
            self._added_re = re.compile(f"({alternatives})")

    def id(self, token):
        return self.added[token]

    def encode(self, text):
        if self._tok is not None:
            return self._tok.encode(text, add_special_tokens=False).ids
        ids = []
        # Added tokens first (the longest at a position), every other byte as its own token.
        for i, piece in enumerate(self._added_re.split(unicodedata.normalize("NFC", text))):
            ids.extend([self.added[piece]] if i % 2 else [self._byte_ids[b] for b in piece.encode()])
        return ids

    def decode(self, ids):
        if self._tok is not None:
            return self._tok.decode(ids, skip_special_tokens=False)
        out = bytearray()
        for i in ids:  # ids past the vocabulary (embedding rows padded to a multiple of 64) decode to nothing
            out += self._id_added[i].encode() if i in self._id_added else bytes([self._id_byte[i]]) \
                if i in self._id_byte else b""
        return out.decode("utf-8", errors="replace")

    def encode_batch(self, texts):
        if self._tok is not None:
            return [e.ids for e in self._tok.encode_batch(texts, add_special_tokens=False)]
        return [self.encode(t) for t in texts]


def _byte_alphabet():
    """GPT-2's byte-to-character map (printable bytes map to themselves, the rest from U+0100 on)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def documents(path):
    return [d for d in pathlib.Path(path).read_text(encoding="utf-8").split("\n\n") if d.strip()]


def stream(enc, texts, seed=None):
    """One int64 tensor: the texts' ids, each followed by <|endoftext|>, shuffled when seed is given."""
    units = enc.encode_batch(texts)
    if seed is not None:
        random.Random(seed).shuffle(units)
    eot = enc.id("<|endoftext|>")
    flat = [i for u in units for i in u + [eot]]
    return torch.tensor(flat, dtype=torch.int64)


def chat_texts(corpus, repeat, seed=0):
    """Chat samples as the template renders them; half with the empty think block of a direct answer."""
    rng = random.Random(seed)
    pairs = [json.loads(line) for line in (pathlib.Path(corpus) / "chat_train.jsonl").read_text().splitlines()]
    return [chat_text(p["user"], p["assistant"], think_block=rng.random() < 0.5) for _ in range(repeat) for p in pairs]


def batches(data, batch, seq, generator):
    """Random windows of seq + 1 tokens: (inputs [B, seq], targets [B, seq])."""
    starts = torch.randint(0, data.numel() - seq - 1, (batch,), generator=generator, device=data.device)
    w = data[starts[:, None] + torch.arange(seq + 1, device=data.device)]
    return w[:, :-1], w[:, 1:]
