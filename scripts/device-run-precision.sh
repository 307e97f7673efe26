#!/usr/bin/env bash
# One device call for issue 4's precision evidence and its speed check: the 24-layer CPU-vs-GPU
# model test (both families; CPU-bound, so it runs in the background) while the GPU op, model
# and graph tests run, then ninfer-bench on the Qwen3-8B shape once the CPU is free again.
#   bash scripts/device-run-precision.sh        after scripts/device-bundle.sh (CARRY= another carry folder)
set -uo pipefail
out="${OUT:-$PWD/precision-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle
summary() { grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|Failure|worst row" "$1" | head -"${2:-12}"; }

step device; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
t0=$(date +%s)
timeout "${LARGE_TIMEOUT:-440}" "$n/tests/gpu_large_model_tests" > "$out/large.log" 2>&1 &
large=$!
for t in gpu_tests gpu_op_tests gpu_model_tests gpu_graph_tests; do
  step "$t"; "$n/tests/$t" > "$out/$t.log" 2>&1; echo "exit $?"; summary "$out/$t.log"
done
step "tensor-core attention worst rows"; grep -E "tensor-core attention" "$out/gpu_op_tests.log"
step "large model, CPU vs GPU (both families)"
wait "$large"; echo "exit $? after $(( $(date +%s) - t0 )) s"
grep -E "large model|  fast|  CPU|  float32|OK \]|FAILED|Failure|actual" "$out/large.log" | head -30
step "ninfer-bench qwen3-8b"
"$n/ninfer/bin/ninfer-bench" --preset qwen3-8b --device cuda --prompt-lengths 4096 --contexts 0,4096 --batches 1,8 \
  --repeats 2 > "$out/bench-qwen3-8b.txt" 2> "$out/bench-qwen3-8b.err"
echo "exit $?"; grep -E "^(prefill|decode)|variants|attention" "$out/bench-qwen3-8b.txt" | head -20
