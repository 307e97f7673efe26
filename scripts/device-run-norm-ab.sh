#!/usr/bin/env bash
# Runs on the device: norm_linear's two CUDA variants (gemv_cc1: the norm inside every warp's
# loop; staged: x * s staged in shared memory per CTA) A/B on the decode step. Each run appends
# a schedule entry for the variant to the unpacked install's sm_90 table, then benches decode
# (batch 1, context 0) and times the step's kernels with ncu.
#   bash scripts/device-run-norm-ab.sh [PRESET...]     default: qwen3-8b qwen3_5-27b
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[[ -d "$n/ninfer" ]] || unpack_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
table="$n/ninfer/share/ninfer/arch/schedules/sm_90.yaml"
[[ -f "$table.orig" ]] || cp "$table" "$table.orig"
step "gpu_op_tests NormLinearGpu.*"
timeout 200 "$n/tests/gpu_op_tests" --gtest_filter='NormLinearGpu.*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|exception" | head
for v in gemv_cc1 staged; do
  cp "$table.orig" "$table"
  echo "  - {op: norm_linear, tokens: [1, 1], variant: $v}" >> "$table"
  for p in ${@:-qwen3-8b qwen3_5-27b}; do
    step "norm_linear/$v: $p decode, batch 1, context 0"
    "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --repeats 3 \
      --decode-steps 64 2>&1 | grep -E "^decode|norm_linear"
    ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$n/ninfer/bin/ninfer-bench" \
      --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 --decode-steps 2 \
      --no-cuda-graph > "/tmp/ncu-$p-$v.csv" 2>/dev/null
    python3 scripts/ncu-summary.py --steps 2 "/tmp/ncu-$p-$v.csv" | grep -E "norm_linear|gemv_cc1|total"
  done
done
cp "$table.orig" "$table"
