#!/usr/bin/env bash
# Runs on the device machine after scripts/device-bundle.sh: a kernel-time profile of one
# decode step (ncu), ninfer-tune on a preset, then ninfer-bench with the tuned table and with
# the built-in one, and transformers side by side. Logs to $OUT (or ./tune-logs).
#   bash scripts/device-run-tune.sh [PRESET] [TUNE_BUDGET_SECONDS]      SKIP_NCU=1: no profile
set -uo pipefail
out="${OUT:-$PWD/tune-logs}"
mkdir -p "$out"
preset="${1:-qwen3-8b}"
budget="${2:-60}"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle
bench="$n/ninfer/bin/ninfer-bench"

if [[ -z "${SKIP_NCU:-}" ]]; then
  # Real clocks and warm caches: ncu's default locked clocks and cache flushes inflate small kernels.
  step "ncu: kernel times of decode steps ($preset, batch 1, eager)"
  ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
    "$bench" --preset "$preset" --device cuda --skip-prefill --contexts 0 --batches 1 --decode-steps 2 --warmup 0 \
    --repeats 1 --no-cuda-graph > "$out/ncu-decode.txt" 2>&1
  echo "exit $?"; grep -E "^\s+[a-z_0-9]+.*\(|gpu__time_duration|invocations" "$out/ncu-decode.txt" | head -3
fi

step "ninfer-tune --preset $preset (budget $budget s)"
export NINFER_CACHE_DIR=/tmp/ninfer-cache
"$n/ninfer/bin/ninfer-tune" --preset "$preset" --buckets 1,2,4,8,64,512,4096 --budget-seconds "$budget" \
  > "$out/tune.txt" 2> "$out/tune.err"
echo "exit $?"; cat "$out/tune.txt" | head -40
for table in tuned builtin; do
  step "ninfer-bench ($table table)"
  [[ $table == builtin ]] && export NINFER_CACHE_DIR=/tmp/no-tuned-tables
  "$bench" --preset "$preset" --device cuda --prompt-lengths 512,4096 --contexts 0 --batches 1,8 --repeats 2 \
    > "$out/bench-$table.txt" 2> "$out/bench-$table.err"
  echo "exit $?"; grep -E "^(prefill|decode)|schedule table" "$out/bench-$table.txt" "$out/bench-$table.err"
done
if [[ -n "${TRANSFORMERS:-}" ]]; then
  step "transformers side by side"
  python3 tools/bench-transformers/bench_transformers.py --ninfer-bench "$bench" --presets "$TRANSFORMERS" \
    --prompt-length 4096 --decode-steps 32 --repeats 2 > "$out/transformers.txt" 2> "$out/transformers.err"
  echo "exit $?"; cat "$out/transformers.txt"; tail -3 "$out/transformers.err"
fi
