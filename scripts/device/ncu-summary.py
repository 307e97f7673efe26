#!/usr/bin/env python3
"""Per-kernel totals from `ncu --csv --metrics gpu__time_duration.sum` output (stdin or file).

Prints one row per (kernel, grid, block): total us divided by --steps, calls, min/max/avg us,
largest total first. Used by scripts/device.sh (profile, tune, routes with NCU=1).
"""
import argparse, csv, sys
from collections import defaultdict

ap = argparse.ArgumentParser()
ap.add_argument("file", nargs="?")
ap.add_argument("--steps", type=float, default=1.0, help="divide totals by this many steps")
a = ap.parse_args()
lines = (open(a.file) if a.file else sys.stdin).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = defaultdict(list)
for r in csv.DictReader(lines[start:]):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r["Metric Unit"]
    us = v / 1000.0 if unit in ("nsecond", "ns") else v * 1000.0 if unit in ("msecond", "ms") else v
    name = r["Kernel Name"].split("(")[0]
    rows[(name, r["Grid Size"], r["Block Size"])].append(us)
total = sum(sum(v) for v in rows.values())
print(f"{'us/step':>10} {'calls':>8} {'min us':>8} {'max us':>8} {'avg us':>8}  kernel grid x block")
for (name, g, b), v in sorted(rows.items(), key=lambda kv: -sum(kv[1])):
    print(f"{sum(v)/a.steps:10.0f} {len(v)/a.steps:8.1f} {min(v):8.1f} {max(v):8.1f} {sum(v)/len(v):8.1f}  {name} {g}x{b}")
print(f"{total/a.steps:10.0f} total us per step")
