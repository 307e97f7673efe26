#!/usr/bin/env python3
"""One checkpoint folder: checkpoints/<name>/ at the repository root (git-ignored).

Checks, naming FILE:LINE for each finding:
  - .gitignore ignores /checkpoints/;
  - every models/*.yaml has a `checkpoint:` that, resolved from models/ as ninfer resolves it,
    is <root>/checkpoints/<name>; a `tokenizer:` line (commented or not) lies in that folder;
    its comment carries a download command that writes that very folder (or an
    `ninfer-quantize ... --out DIR` that makes it from a downloaded one);
  - every download command (`hf download REPO --local-dir DIR`) in README.md, CONTRIBUTING.md,
    docs/*.md, models/*.yaml and scripts/*.sh writes <root>/checkpoints/<REPO's name> when run
    from the repository root, as the docs run every command;
  - every `--checkpoint DIR` naming a checkpoints/ folder in those files resolves from the
    repository root into <root>/checkpoints/, and every `checkpoint:` of a YAML block in the
    docs (a manifest in models/) from models/;
  - scripts/dev.sh runs the committed demo model, models/qwen3_5-demo, which exists.
  check_checkpoint_paths.py --root DIR     exit 0 clean, 1 a finding
"""
import argparse
import glob
import os
import re
import sys

DOWNLOAD = re.compile(r"\bhf download\s+(\S+)\s+.*?--local-dir[ =](\S+)")
QUANTIZE_OUT = re.compile(r"\bninfer-quantize\b.*?--out[ =](\S+)")
OLD_CLI = re.compile(r"\bhuggingface-cli\b")
CHECKPOINT_FLAG = re.compile(r"--checkpoint[ =](\S*checkpoints/[^\s\"'`)]+)")
YAML_KEY = re.compile(r"^\s*#?\s*(checkpoint|tokenizer):\s*(\S+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    root = os.path.realpath(ap.parse_args().root)
    store = os.path.join(root, "checkpoints")
    findings = []

    def under_store(path, base):
        p = os.path.normpath(os.path.join(base, path))
        return os.path.dirname(p) == store, p

    def rel(p):
        return os.path.relpath(p, root)

    gi = os.path.join(root, ".gitignore")
    if not os.path.exists(gi) or not any(l.strip() in ("/checkpoints/", "checkpoints/")
                                         for l in open(gi, encoding="utf-8")):
        findings.append(".gitignore:1: /checkpoints/ is not ignored")

    docs = [os.path.join(root, f) for f in ("README.md", "CONTRIBUTING.md")] \
        + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    manifests = sorted(glob.glob(os.path.join(root, "models", "*.yaml")))
    scripts = sorted(glob.glob(os.path.join(root, "scripts", "*.sh")))

    for f in docs + manifests + scripts:
        if not os.path.exists(f):
            continue
        in_yaml = False
        for n, line in enumerate(open(f, encoding="utf-8"), 1):
            where = f"{rel(f)}:{n}"
            if OLD_CLI.search(line):
                findings.append(f"{where}: huggingface-cli no longer works in huggingface_hub 1.x; use `hf download`")
            for repo, local in DOWNLOAD.findall(line):
                ok, p = under_store(local, root)
                name = repo.rstrip("/").split("/")[-1]
                if not ok or os.path.basename(p) != name:
                    findings.append(f"{where}: `hf download {repo}` writes {rel(p)} (run from the repository "
                                    f"root); the checkpoint folder is checkpoints/{name}")
            for d in CHECKPOINT_FLAG.findall(line):
                ok, p = under_store(d.rstrip("/"), root)
                if not ok:
                    findings.append(f"{where}: --checkpoint {d} is {rel(p)} from the repository root, "
                                    f"not a folder of checkpoints/")
            if f.endswith(".md"):
                if line.startswith("```"):
                    in_yaml = not in_yaml and line.strip().startswith("```yaml")
                    continue
                m = YAML_KEY.match(line) if in_yaml else None
                if m and m.group(1) == "checkpoint":
                    ok, p = under_store(m.group(2), os.path.join(root, "models"))
                    if not ok:
                        findings.append(f"{where}: checkpoint: {m.group(2)} in a manifest in models/ is {rel(p)}, "
                                        f"not a folder of checkpoints/")

    for f in manifests:
        text = open(f, encoding="utf-8").read().split("\n")
        ckpt, downloads = None, []
        for n, line in enumerate(text, 1):
            m = YAML_KEY.match(line)
            if m and m.group(1) == "checkpoint" and not line.lstrip().startswith("#"):
                ok, ckpt = under_store(m.group(2), os.path.dirname(f))
                if not ok:
                    findings.append(f"{rel(f)}:{n}: checkpoint: {m.group(2)} resolves to {rel(ckpt)}, "
                                    f"not a folder of checkpoints/")
            elif m and m.group(1) == "tokenizer" and ckpt:
                p = os.path.normpath(os.path.join(os.path.dirname(f), m.group(2)))
                if os.path.dirname(p) != ckpt:
                    findings.append(f"{rel(f)}:{n}: tokenizer: {m.group(2)} is not in the checkpoint folder {rel(ckpt)}")
            for repo, local in DOWNLOAD.findall(line):
                downloads.append(os.path.normpath(os.path.join(root, local)))
            for made in QUANTIZE_OUT.findall(line):
                downloads.append(os.path.normpath(os.path.join(root, made)))
        if ckpt is None:
            findings.append(f"{rel(f)}:1: no checkpoint: key")
        elif ckpt not in downloads:
            findings.append(f"{rel(f)}:1: no download command in its comment writes {rel(ckpt)} "
                            f"(found: {', '.join(rel(d) for d in downloads) or 'none'})")

    dev = os.path.join(root, "scripts", "dev.sh")
    if os.path.exists(dev):
        if '"$root/models/qwen3_5-demo"' not in open(dev, encoding="utf-8").read():
            findings.append("scripts/dev.sh:1: the demo run does not use the committed models/qwen3_5-demo")
        elif not os.path.exists(os.path.join(root, "models", "qwen3_5-demo", "config.json")):
            findings.append("models/qwen3_5-demo:1: the demo model scripts/dev.sh runs is missing")

    for x in findings:
        print(x)
    if findings:
        print(f"check_checkpoint_paths: {len(findings)} findings; checkpoints live in checkpoints/<name>/ "
              f"at the repository root (docs/manifest.md, \"Checkpoint folders\")", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
