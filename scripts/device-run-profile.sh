#!/usr/bin/env bash
# Runs on the device: per-kernel times (ncu, real clocks, warm caches) of a decode step and a
# prefill, summarised by scripts/ncu-summary.py. Logs go to $OUT (or ./gpu-logs).
#   bash scripts/device-run-profile.sh [PRESET...]     default: qwen3-8b qwen3_5-27b
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
ensure_bundle
bench="$n/ninfer/bin/ninfer-bench"
ncu_csv() { ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$@"; }
for preset in "${@:-qwen3-8b qwen3_5-27b}"; do
  for p in $preset; do
    step "ncu decode $p (2 eager steps, batch 1, context 0)"
    ncu_csv "$bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 \
      --decode-steps 2 --no-cuda-graph > "$out/ncu-decode-$p.csv" 2> "$out/ncu-decode-$p.err"
    python3 scripts/ncu-summary.py --steps 2 "$out/ncu-decode-$p.csv" | tee "$out/ncu-decode-$p.txt" | head -30
    step "ncu prefill $p (one 4096-token prompt)"
    ncu_csv "$bench" --preset "$p" --device cuda --skip-decode --prompt-lengths 4096 --warmup 0 --repeats 1 \
      > "$out/ncu-prefill-$p.csv" 2> "$out/ncu-prefill-$p.err"
    python3 scripts/ncu-summary.py "$out/ncu-prefill-$p.csv" | tee "$out/ncu-prefill-$p.txt" | head -30
  done
done
