#!/usr/bin/env bash
# The end-of-session GPU run: every GPU check (quick), the 24-layer CPU-vs-GPU model test for
# the hybrid family, ninfer-bench on both issue-5 shapes, and ninfer-tune (with its end-to-end
# confirmation) followed by ninfer-bench under the tuned table. Logs to $OUT.
set -uo pipefail
out="${OUT:-$PWD/final-logs}"
mkdir -p "$out"
OUT="$out" bash scripts/device-run-gpu.sh quick 2>&1 | tail -40
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
echo; echo "=== gpu_graph_tests"; "$n/tests/gpu_graph_tests" 2>&1 | tail -1
echo; echo "=== large model (Qwen3.5), CPU vs GPU"
timeout "${LARGE_TIMEOUT:-300}" "$n/tests/gpu_large_model_tests" --gtest_filter='*Qwen3_5*' > "$out/large.log" 2>&1
echo "exit $?"; grep -E "large model|OK|FAILED|Failure" "$out/large.log" | head
export NINFER_CACHE_DIR=/tmp/final-builtin
SKIP_TESTS=1 OUT="$out" bash scripts/device-run-bench.sh qwen3-8b,qwen3_5-27b --prompt-lengths 512,4096,8192 \
  --contexts 0,4096 --batches 1,8 --repeats 2 2>&1 | grep -E "^(===|exit|prefill|decode)"
echo; echo "=== ninfer-tune qwen3-8b (confirmed end to end)"
export NINFER_CACHE_DIR=/tmp/final-tuned
"$n/ninfer/bin/ninfer-tune" --preset qwen3-8b --buckets 1,2,4,8,512,4096 --budget-seconds 30 --repeats 3 \
  > "$out/tune-final.txt" 2> "$out/tune-final.err"; echo "exit $?"; cat "$out/tune-final.txt"
"$n/ninfer/bin/ninfer-bench" --preset qwen3-8b --device cuda --prompt-lengths 512,4096 --contexts 0 --batches 1,8 \
  --repeats 2 > "$out/bench-tuned-final.txt" 2>&1; echo "exit $?"; grep -E "^(prefill|decode)|tuned schedule" "$out/bench-tuned-final.txt"
