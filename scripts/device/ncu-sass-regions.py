#!/usr/bin/env python3
"""Summarises ncu's SASS source page of one kernel (ncu -i REP --page source --csv --print-source sass,
optionally gzipped): warp-stall samples by reason, the hottest instructions, and samples and
instructions per warp between the kernel's synchronisation points (griddepcontrol.wait = ACQBULK,
CTA and cluster barriers, returns), so a latency-bound kernel's time can be placed in its stages.

  python3 scripts/device/ncu-sass-regions.py sass.csv.gz [--top N] [--warps W]
W: the launch's warps (grid x warps per CTA), to turn executed warp instructions into per-warp counts.
"""
import argparse
import collections
import csv
import gzip

MARKS = ("ACQBULK", "BAR.SYNC", "UCGABAR_WAIT", "EXIT", "RET.")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header = rows[1]  # rows[0] names the kernel
    return header, [r for r in rows[2:] if len(r) >= len(header)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--warps", type=int, default=0)
    a = ap.parse_args()
    header, rows = load(a.csv)
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples = [int(r[col["Warp Stall Sampling (All Samples)"]] or 0) for r in rows]
    executed = [int(r[col["Instructions Executed"]] or 0) for r in rows]
    total = sum(samples) or 1
    by_reason = collections.Counter()
    for r in rows:
        for k in reasons:
            by_reason[k[6:]] += int(r[col[k]] or 0)
    print(f"{len(rows)} SASS instructions, {total} samples, {sum(executed)} warp instructions executed")
    for k, v in by_reason.most_common(8):
        print(f"  {k:22s} {v:6d} {100 * v / total:5.1f}%")
    print("hottest instructions (index, samples, executed, instruction, main stalls):")
    for i in sorted(range(len(rows)), key=lambda i: -samples[i])[: a.top]:
        r = rows[i]
        top = sorted(((int(r[col[k]] or 0), k[6:]) for k in reasons), reverse=True)[:2]
        stalls = ", ".join(f"{k}={v}" for v, k in top if v)
        print(f"  #{i:<5d} {samples[i]:5d} {executed[i]:7d}  {r[col['Source']].strip()[:56]:56s} {stalls}")
    print("stages, split after each synchronisation point (index range, samples, warp instructions per warp):")
    start = 0
    for i, r in enumerate(rows + [None]):
        if r is not None and not any(m in r[col["Source"]] for m in MARKS):
            continue
        end = min(i + 1, len(rows))
        s, n = sum(samples[start:end]), sum(executed[start:end])
        if s or n:
            ends = rows[end - 1][col["Source"]].strip()[:28]
            per_warp = f"{n / a.warps:8.1f}" if a.warps else f"{n:10d}"
            print(f"  [{start:5d}, {end:5d}) {s:5d} {100 * s / total:5.1f}%  {per_warp}  ends: {ends}")
        start = end


if __name__ == "__main__":
    main()
