#!/usr/bin/env bash
# Runs on the device (sixth session): the tests of norm_linear and linear's accumulate flag, the
# model and graph suites and a memcheck of the new kernels, then ninfer-bench on the bench shapes and
# the decode ablation.
#   bash scripts/device-run-s6.sh tests|bench-8b|bench-27b|ablation ...      logs: $OUT (or ./gpu-logs)
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/device-env.sh"
[[ -d "$n/ninfer" ]] || unpack_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
run_test() { # binary filter
  step "$1 ${2:-}"; timeout 300 "$n/tests/$1" ${2:+--gtest_filter="$2"} > "$out/$1${NINFER_TEST_PLUGIN:+-$NINFER_TEST_PLUGIN}.log" 2>&1; echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual" "$out/$1${NINFER_TEST_PLUGIN:+-$NINFER_TEST_PLUGIN}.log" | head -30
}
bench() {
  step "ninfer-bench $1"
  timeout 200 "$n/ninfer/bin/ninfer-bench" --preset "$1" --device cuda --prompt-lengths 4096 --contexts 0,4096 \
    --batches 1,8 --repeats 3 --decode-steps 32 > "$out/bench-$1.txt" 2>&1; echo "exit $?"
  grep -E "^(prefill|decode|bandwidth)" "$out/bench-$1.txt"
}
for what in "$@"; do
  case "$what" in
    tests)
      run_test gpu_op_tests
      run_test gpu_generic_tests 'GpuJitLinear.Accumulate*'
      NINFER_TEST_PLUGIN=cuda-generic run_test gpu_op_tests 'NormLinearGpu.*:LinearGpu.Accumulate*'
      run_test gpu_model_tests
      run_test gpu_graph_tests
      step "compute-sanitizer memcheck: norm_linear, linear accumulate"
      timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$n/tests/gpu_op_tests" \
        --gtest_filter='NormLinearGpu.*:LinearGpu.Accumulate*' > "$out/memcheck.log" 2>&1; echo "memcheck exit $?"
      tail -2 "$out/memcheck.log" ;;
    bench-8b) bench qwen3-8b ;;
    bench-27b) bench qwen3_5-27b ;;
    ablation) bash "$here/device-run-ablation.sh" 2>&1 | tee "$out/ablation.txt" ;;
  esac
done
