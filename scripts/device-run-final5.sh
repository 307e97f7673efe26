#!/usr/bin/env bash
# Runs on the device (fifth session's closing run): the model and graph suites, sanitizers on the
# kernels added this session, ninfer-bench on both bench shapes, and an ncu detail of the decode
# hidden-size norm. Logs go to $OUT (or ./gpu-logs).
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
[[ -d "$n/ninfer" ]] || unpack_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
for t in gpu_model_tests gpu_graph_tests; do
  step "$t"; timeout 200 "$n/tests/$t" > "$out/$t.log" 2>&1; echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/$t.log"
done
step "compute-sanitizer: racecheck head_norm_rope + chunk-parallel GDN, memcheck conv rows + gdn_gating mma"
compute-sanitizer --tool racecheck --error-exitcode 9 "$n/tests/gpu_op_tests" --gtest_filter='*HeadNormRope*:*GatedDeltaRule*' > "$out/racecheck.log" 2>&1; echo "racecheck exit $?"; tail -2 "$out/racecheck.log"
compute-sanitizer --tool memcheck --error-exitcode 9 "$n/tests/gpu_op_tests" --gtest_filter='*CausalConv1d*:GdnGatingGpu.*' > "$out/memcheck.log" 2>&1; echo "memcheck exit $?"; tail -2 "$out/memcheck.log"
for p in qwen3-8b qwen3_5-27b; do
  step "ninfer-bench $p"
  timeout 170 "$n/ninfer/bin/ninfer-bench" --preset $p --device cuda --prompt-lengths 4096 --contexts 0,4096 --batches 1,8 \
    --repeats 3 --decode-steps 32 > "$out/bench-$p.txt" 2>&1; echo "exit $?"; grep -E "^(prefill|decode|bandwidth)" "$out/bench-$p.txt"
done
step "ncu detail: one decode rms_norm_in_registers launch (27B)"
timeout 90 ncu --clock-control none --cache-control none --set full -k regex:rms_norm_in_registers --launch-skip 20 -c 1 \
  "$n/ninfer/bin/ninfer-bench" --preset qwen3_5-27b --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 \
  --repeats 1 --decode-steps 2 --no-cuda-graph > "$out/ncu-norm.txt" 2>&1; echo "exit $?"
grep -E "Duration|Elapsed Cycles|Memory Throughput|Achieved Occupancy|Registers Per|Stall|One or More|Warp Cycles Per Issued" "$out/ncu-norm.txt" | head -20
