#!/usr/bin/env python3
"""The documentation checks fail where they should: planted Markdown files and a planted
checkout, each with one kind of mistake, must fail naming FILE:LINE; their correct forms pass.
  check_docs_test.py --bin build/bin --source .
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_docs  # noqa: E402

failures = []


def expect(cond, what):
    """what: a one-line claim, then (after a newline) the output shown only when it fails."""
    claim, _, detail = what.partition("\n")
    print(("ok   " if cond else "FAIL ") + claim)
    if not cond:
        print("\n".join("    " + l for l in detail.rstrip().split("\n")))
        failures.append(claim)


def run_docs(args, text):
    with tempfile.TemporaryDirectory() as d:
        md = os.path.join(d, "planted.md")
        open(md, "w", encoding="utf-8").write(text)
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_docs.py"), "--bin", args.bin,
                            "--source", args.source, md], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def run_paths(files):
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)) or d, exist_ok=True)
            open(os.path.join(d, name), "w", encoding="utf-8").write(text)
        r = subprocess.run([sys.executable, os.path.join(HERE, "check_checkpoint_paths.py"), "--root", d],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", required=True)
    args = ap.parse_args()
    fence = "```"

    # The matcher: … inside a line, … as a whole line (any number of lines, none included).
    m = check_docs.output_matches
    expect(m(["a … c"], ["a b c"]), "… matches text inside a line")
    expect(not m(["a … c"], ["a b d"]), "… does not excuse the text around it")
    expect(m(["x", "…", "y"], ["x", "y"]) and m(["x", "…", "y"], ["x", "1", "2", "y"]), "a … line matches 0..n lines")
    expect(not m(["x", "y"], ["x", "y", "z"]), "an extra printed line fails")
    expect(not m(["x", "y", "z"], ["x", "y"]), "a missing printed line fails")

    good = (f"{fence}console ninfer-check\n$ ninfer-info --list-device-models\n…\nH200                     sm_90     132 SMs    141 GiB\n…\n{fence}\n")
    rc, out = run_docs(args, good)
    expect(rc == 0, "a documented output the tool prints passes\n" + out)

    rc, out = run_docs(args, good.replace("132 SMs", "133 SMs"))
    expect(rc == 1 and "planted.md:2:" in out and "+H200" in out, "a changed output fails with FILE:LINE and a diff\n" + out)

    rc, out = run_docs(args, f"text\n\n{fence}sh\nninfer-info --list-ops\n{fence}\n")
    expect(rc == 1 and "planted.md:3:" in out and "without a mark" in out, "an unmarked sh block fails\n" + out)

    rc, out = run_docs(args, f"{fence}sh ninfer-check\nninfer-info --plan no_such_op\n{fence}\n")
    expect(rc == 1 and "exited 1, expected 0" in out, "a command that fails fails the check\n" + out)

    rc, out = run_docs(args, f"{fence}console ninfer-check\n$ ninfer-info --plan no_such_op 2>&1\n…no_such_op…\n[exit 1]\n{fence}\n")
    expect(rc == 0, "[exit 1] documents an error exit\n" + out)

    rc, out = run_docs(args, f"{fence}console ninfer-check plugin=no-such-plugin\n$ ninfer-info --list-ops\nwrong\n{fence}\n")
    expect(rc == 0 and "skipped (plugin no-such-plugin not built)" in out, "a block needing an unbuilt plugin is skipped\n" + out)

    table = "<!-- ninfer-check-table: ninfer-info --list-ops -->\n\n| op | x |\n|---|---|\n| `gdn_gating` | y |\n"
    rc, out = run_docs(args, table)
    expect(rc == 1 and "planted.md:1:" in out and "missing from the table: embedding" in out,
           "a table missing ops fails naming them\n" + out)

    flags = "<!-- ninfer-check-flags: ninfer-tokenize -->\n| option | meaning |\n|---|---|\n| `--tokenizer` | x |\n"
    rc, out = run_docs(args, flags)
    expect(rc == 1 and "planted.md:1:" in out and "never names: --text" in out,
           "options of --help the file never names fail\n" + out)
    rc, out = run_docs(args, flags + "| `--no-such-flag` | y |\n")
    expect(rc == 1 and "--help does not list: --no-such-flag" in out, "a table option --help lacks fails\n" + out)

    rc, out = run_docs(args, f"{fence}console ninfer-check\n$ ls checkpoints/Qwen3-0.6B/config.json models/qwen3-8b.yaml\ncheckpoints/Qwen3-0.6B/config.json\nmodels/qwen3-8b.yaml\n{fence}\n")
    expect(rc == 0, "a named checkpoint folder gets a stand-in; models/ holds the manifests\n" + out)

    # The checkpoint folder convention.
    manifest = ("# hf download Qwen/Qwen3-0.6B --local-dir checkpoints/Qwen3-0.6B\n"
                "checkpoint: ../checkpoints/Qwen3-0.6B\n# tokenizer: ../checkpoints/Qwen3-0.6B/tokenizer.json\n")
    clean = {".gitignore": "/checkpoints/\n", "models/q.yaml": manifest,
             "README.md": f"{fence}sh\nninfer-run --checkpoint checkpoints/Qwen3-0.6B\n{fence}\n",
             "scripts/dev.sh": 'demo="$root/models/qwen3_5-demo"\n', "models/qwen3_5-demo/config.json": "{}\n"}
    rc, out = run_paths(clean)
    expect(rc == 0, "a tree that keeps the convention passes\n" + out)
    for name, text, needle in [
            ("models/q.yaml", manifest.replace("checkpoint: ../checkpoints", "checkpoint: ../../checkpoints"),
             "models/q.yaml:2: checkpoint: ../../checkpoints/Qwen3-0.6B resolves to ../checkpoints/Qwen3-0.6B"),
            ("models/q.yaml", manifest.replace("--local-dir checkpoints", "--local-dir ../checkpoints"),
             "models/q.yaml:1: `hf download Qwen/Qwen3-0.6B` writes ../checkpoints/Qwen3-0.6B"),
            ("models/q.yaml", manifest.replace("tokenizer: ../checkpoints/Qwen3-0.6B/", "tokenizer: ../tok/"),
             "models/q.yaml:3: tokenizer: ../tok/tokenizer.json is not in the checkpoint folder"),
            ("README.md", clean["README.md"].replace("--checkpoint checkpoints", "--checkpoint ../checkpoints"),
             "README.md:2: --checkpoint ../checkpoints/Qwen3-0.6B"),
            ("README.md", f"{fence}yaml\ncheckpoint: checkpoints/X\n{fence}\n",
             "README.md:2: checkpoint: checkpoints/X in a manifest in models/ is models/checkpoints/X"),
            ("docs/a.md", "huggingface-cli download Qwen/Qwen3-8B --local-dir checkpoints/Qwen3-8B\n",
             "docs/a.md:1: huggingface-cli no longer works"),
            (".gitignore", "build/\n", ".gitignore:1: /checkpoints/ is not ignored"),
            ("scripts/dev.sh", 'demo="$build_dir/demo/x"\n', "scripts/dev.sh:1: the demo run does not use"),
            ("models/qwen3_5-demo/config.json", None, "models/qwen3_5-demo:1: the demo model scripts/dev.sh runs is missing")]:
        planted = dict(clean)
        if text is None:
            del planted[name]
        else:
            planted[name] = text
        rc, out = run_paths(planted)
        expect(rc == 1 and needle in out, f"checkpoint paths: {needle}\n" + out)

    print(f"check_docs_test: {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
