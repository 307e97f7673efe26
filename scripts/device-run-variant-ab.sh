#!/usr/bin/env bash
# Runs on the device: A/B of the variants one schedule-table bucket could route to, on the decode
# step. For each variant it puts `{op: OP, tokens: [T, T], variant: V}` first in the unpacked
# install's sm_90 table (the first entry that covers a bucket wins), benches decode (batch 1,
# context 0) and times the step's kernels with ncu.
#   bash scripts/device-run-variant-ab.sh OP TOKENS "VARIANT..." [PRESET...]
#   e.g. bash scripts/device-run-variant-ab.sh linear 1 "gemv_cc1 gemv4" qwen3-8b
# Presets default to qwen3-8b qwen3_5-27b. How norm_linear's load form was chosen
# (docs/performance.md "Sixth session"): the same bench and ncu lines, one build per form.
set -uo pipefail
[[ $# -ge 3 ]] || { sed -n 2,9p "$0"; exit 2; }
op="$1" tokens="$2" variants="$3"
shift 3
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
ensure_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
table="$n/ninfer/share/ninfer/arch/schedules/sm_90.yaml"
[[ -f "$table.orig" ]] || cp "$table" "$table.orig"
for v in $variants; do
  cp "$table.orig" "$table"
  sed -i "/^entries:/a\\  - {op: $op, tokens: [$tokens, $tokens], variant: $v}" "$table"
  for p in ${@:-qwen3-8b qwen3_5-27b}; do
    step "$op/$v at $tokens token(s): $p decode, batch 1, context 0"
    "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --repeats 3 \
      --decode-steps 64 2>&1 | grep -E "^decode|$op "
    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$n/ninfer/bin/ninfer-bench" \
      --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 --decode-steps 2 \
      --no-cuda-graph > "/tmp/ncu-$p-$v.csv" 2>/dev/null
    python3 scripts/ncu-summary.py --steps 2 "/tmp/ncu-$p-$v.csv" | grep -E "${op}|total"
  done
done
cp "$table.orig" "$table"
