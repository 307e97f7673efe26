#!/usr/bin/env bash
# Runs on the device: any list of GPU checks and measurements, one argument each, in order, so a
# session's device call is one command line instead of another per-session script.
#   test=BINARY[:FILTER]          a GPU test binary of the bundle (cuda-sm90), e.g. test=gpu_op_tests:'GdnDecode*'
#   generic-test=BINARY[:FILTER]  the same on cuda-generic (NVRTC)
#   memcheck=BINARY:FILTER        compute-sanitizer memcheck of those tests (racecheck=: its racecheck)
#   bench=PRESET                  ninfer-bench, the issue's points (prompt 4096; contexts 0, 4096; batches 1, 8)
#   ablation[=PRESET]             scripts/device-run-ablation.sh (SKIPS in the environment: its other skip sets)
#   ab=OP:TOKENS:"VARIANTS"[:PRESETS]  scripts/device-run-variant-ab.sh
#   routes=OP@T=VARIANT+OP@T=VARIANT...[:PRESETS]  decode (batch 1, context 0) with those table
#                                 entries put first, all together (how routes of two ops combine;
#                                 "routes=" alone: the built-in table; NCU=1: ncu's per-kernel
#                                 times of the projections too; CONTEXTS=N,M: decode at those
#                                 context depths instead of 0)
# Logs go to $OUT (or ./gpu-logs); the console gets the summaries.
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/device-env.sh"
ensure_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache

run_test() { # plugin binary [filter]
  local log="$out/$2${1:+-$1}.log"
  step "$2 ${3:-} ${1:+($1)}"
  NINFER_TEST_PLUGIN="$1" timeout 400 "$n/tests/$2" ${3:+--gtest_filter="$3"} > "$log" 2>&1
  echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|Expected|Which is|actual|tolerance" "$log" | head -40
}

for arg in "$@"; do
  kind="${arg%%=*}" val="${arg#*=}"
  IFS=: read -r a b c d <<< "$val"
  first="${val%%:*}" rest="${val#*:}" # a gtest filter keeps its own colons
  [[ "$val" == *:* ]] || rest=""
  case "$kind" in
    test) run_test "" "$first" "$rest" ;;
    generic-test) run_test cuda-generic "$first" "$rest" ;;
    memcheck | racecheck)
      step "compute-sanitizer $kind: $first $rest"
      timeout 400 compute-sanitizer --tool "$kind" --error-exitcode 9 "$n/tests/$first" --gtest_filter="$rest" \
        > "$out/$kind-$first.log" 2>&1
      echo "$kind exit $?"; tail -2 "$out/$kind-$first.log" ;;
    bench)
      step "ninfer-bench $a"
      timeout 300 "$n/ninfer/bin/ninfer-bench" --preset "$a" --device cuda --prompt-lengths 4096 --contexts 0,4096 \
        --batches 1,8 --repeats 3 --decode-steps 32 > "$out/bench-$a.txt" 2>&1
      echo "exit $?"; grep -E "^(prefill|decode|bandwidth)" "$out/bench-$a.txt" ;;
    ablation) [[ "$arg" == *=* ]] || a=""
      bash "$here/device-run-ablation.sh" $a 2>&1 | tee -a "$out/ablation.txt" ;;
    routes)
      IFS=+ read -ra entries <<< "$first"
      table_routes_first "${entries[@]}"
      for p in ${rest:-qwen3-8b qwen3_5-27b}; do
        step "routes ${first:-built-in}: $p decode, batch 1, context ${CONTEXTS:-0}"
        "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda --skip-prefill --contexts "${CONTEXTS:-0}" --batches 1 \
          --repeats 3 --decode-steps 64 > "$out/routes-$p-${first//[^a-z0-9_]/_}.txt" 2>&1
        grep -E "^decode|linear " "$out/routes-$p-${first//[^a-z0-9_]/_}.txt"
        [[ "${NCU:-0}" != 1 ]] || ncu_decode_kernels "$p" linear
      done
      table_restore ;;
    ab) bash "$here/device-run-variant-ab.sh" "$a" "$b" "$c" $d 2>&1 | tee -a "$out/variant-ab.txt" ;;
    *) echo "unknown check: $arg"; sed -n 2,11p "$0"; exit 2 ;;
  esac
done
