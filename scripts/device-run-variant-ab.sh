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
for v in $variants; do
  table_routes_first "$op@$tokens=$v"
  for p in ${@:-qwen3-8b qwen3_5-27b}; do
    step "$op/$v at $tokens token(s): $p decode, batch 1, context 0"
    "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --repeats 3 \
      --decode-steps 64 2>&1 | grep -E "^decode|$op "
    ncu_decode_kernels "$p" "$op"
  done
done
table_restore
