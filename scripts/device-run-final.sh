#!/usr/bin/env bash
# The end-of-session GPU run, sized for one 10-minute device call: the GPU test suites,
# ninfer-bench on both issue-5 shapes (16-bit KV cache, the default, and float32 at context
# 4096 for comparison), ninfer-tune on the Qwen3.5-27B shape with ninfer-bench under the tuned
# and the built-in table, and cuda-generic against cuda-sm90. Logs to $OUT.
set -uo pipefail
out="${OUT:-$PWD/final-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle
bench="$n/ninfer/bin/ninfer-bench"
for t in gpu_op_tests gpu_tests gpu_graph_tests gpu_model_tests; do
  step "$t"; timeout 240 "$n/tests/$t" > "$out/$t.log" 2>&1; echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/$t.log" | head -8
done
export NINFER_CACHE_DIR=/tmp/final-builtin
for p in qwen3-8b qwen3_5-27b; do
  step "ninfer-bench --preset $p"
  timeout 150 "$bench" --preset $p --device cuda --prompt-lengths 4096 --contexts 0,4096 --batches 1,8 --repeats 3 \
    --decode-steps 32 > "$out/bench-$p.txt" 2> "$out/bench-$p.err"; echo "exit $?"; grep -E "^(prefill|decode) " "$out/bench-$p.txt"
done
step "ninfer-bench qwen3-8b --kv-dtype float32 (context 4096)"
timeout 90 "$bench" --preset qwen3-8b --device cuda --skip-prefill --contexts 4096 --batches 1,8 --repeats 3 \
  --decode-steps 32 --kv-dtype float32 > "$out/bench-qwen3-8b-kvf32.txt" 2>&1; echo "exit $?"
grep -E "^decode " "$out/bench-qwen3-8b-kvf32.txt"
step "ninfer-tune --preset qwen3_5-27b (confirmed end to end), then ninfer-bench with the tuned table"
export NINFER_CACHE_DIR=/tmp/final-tuned
timeout 150 "$n/ninfer/bin/ninfer-tune" --preset qwen3_5-27b --buckets 1,2,4,8,512,4096 --budget-seconds 40 --repeats 3 \
  > "$out/tune-27b.txt" 2> "$out/tune-27b.err"; echo "exit $?"; cat "$out/tune-27b.txt" | tail -25
timeout 120 "$bench" --preset qwen3_5-27b --device cuda --prompt-lengths 4096 --contexts 0 --batches 1,8 --repeats 3 \
  --decode-steps 32 > "$out/bench-27b-tuned.txt" 2>&1; echo "exit $?"; grep -E "^(prefill|decode) |tuned" "$out/bench-27b-tuned.txt"
for p in cuda-generic cuda-sm90; do
  step "ninfer-bench --plugin $p (qwen3-8b)"
  timeout 90 "$bench" --preset qwen3-8b --device cuda --plugin $p --prompt-lengths 512 --contexts 0 --batches 1 \
    --repeats 2 > "$out/bench-8b-$p.txt" 2>&1; echo "exit $?"; grep -E "^(prefill|decode) " "$out/bench-8b-$p.txt"
done
