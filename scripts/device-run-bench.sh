#!/usr/bin/env bash
# Runs on the device machine after scripts/device-bundle.sh: the CUDA-graph and fill checks, then
# ninfer-bench on the issue-5 shapes. Logs and JSON go to $OUT (or ./bench-logs).
#   bash scripts/device-run-bench.sh [PRESETS] [BENCH_ARGS...]
#   PRESETS: comma list, default qwen3-8b,qwen3_5-27b
set -uo pipefail
out="${OUT:-$PWD/bench-logs}"
mkdir -p "$out"
presets="${1:-qwen3-8b,qwen3_5-27b}"
shift || true
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle

step device; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
if [[ -z "${SKIP_TESTS:-}" ]]; then
  step "gpu_graph_tests"; "$n/tests/gpu_graph_tests" > "$out/graph.log" 2>&1; echo "exit $?"; grep -E "OK|FAILED|Failure" "$out/graph.log" | head
  step "fill_random"; "$n/tests/gpu_op_tests" --gtest_filter='GpuFillRandom*' 2>&1 | grep -E "OK|FAILED|Failure" | head
fi
for p in ${presets//,/ }; do
  step "ninfer-bench --preset $p $*"
  "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda "$@" > "$out/bench-$p.txt" 2> "$out/bench-$p.err"
  echo "exit $?"; cat "$out/bench-$p.txt"; tail -3 "$out/bench-$p.err"
done
