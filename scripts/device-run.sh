#!/usr/bin/env bash
# Runs on the device: any list of GPU checks and measurements, one argument each, in order, so a
# session's device call is one command line instead of another per-session script.
#   test=BINARY[:FILTER]          a GPU test binary of the bundle (cuda-sm90), e.g. test=gpu_op_tests:'GdnDecode*'
#                                 (TEST_TIMEOUT: seconds, default 400; gpu_large_model_tests needs ~300 per family)
#   generic-test=BINARY[:FILTER]  the same on cuda-generic (NVRTC)
#   memcheck=BINARY:FILTER        compute-sanitizer memcheck of those tests (racecheck=: its racecheck;
#                                 SANITIZER_TIMEOUT: seconds, default 400)
#   bench=PRESET                  ninfer-bench, the issue's points (prompt 4096; contexts 0, 4096; batches 1, 8)
#   ablation[=PRESET]             scripts/device-run-ablation.sh (SKIPS in the environment: its other skip sets)
#   ab=OP:TOKENS:"VARIANTS"[:PRESETS]  scripts/device-run-variant-ab.sh
#   routes=OP@T=VARIANT+OP@T=VARIANT...[:PRESETS]  decode (batch 1, context 0) with those table
#                                 entries put first, all together (OP@T/LO-HI/LO-HI...=VARIANT: only
#                                 calls whose dims[0], dims[1], ... lie in those ranges, in order; how
#                                 routes of two ops combine;
#                                 "routes=" alone: the built-in table; NCU=1: ncu's per-kernel
#                                 times of the projections too; CONTEXTS=N,M: decode at those
#                                 context depths instead of 0; with two or more, what each deeper
#                                 context adds to a step, ninfer-bench's depth growth lines)
# Logs go to $OUT (or ./gpu-logs), one per run (fresh_log: a second bundle or a repeated run gets its own
# name); the console gets the summaries.
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
here="$(dirname "${BASH_SOURCE[0]}")"
source "$here/device-env.sh"
ensure_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache

# A log path that no earlier run of this call wrote: NAME-BUNDLE.EXT, then NAME-BUNDLE-2.EXT, ...
# (BUNDLE: the CARRY folder when it is not the default, so an A/B's two bundles never share a log;
# a name repeated in one call, as in an ABA, gets the next number instead of overwriting).
fresh_log() { # name ext
  local tag="${CARRY:-.carry}" f i=2
  tag="${tag##*/}"
  [[ "$tag" == .carry ]] && tag="" || tag="-${tag#.}"
  local base="$out/$1$tag"
  f="$base.$2"
  while [[ -e "$f" ]]; do f="$base-$i.$2"; i=$((i + 1)); done
  echo "$f"
}

run_test() { # plugin binary [filter]
  local log
  log="$(fresh_log "$2${1:+-$1}" log)"
  step "$2 ${3:-} ${1:+($1)}"
  NINFER_TEST_PLUGIN="$1" timeout "${TEST_TIMEOUT:-400}" "$n/tests/$2" ${3:+--gtest_filter="$3"} > "$log" 2>&1
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
      log="$(fresh_log "$kind-$first" log)"
      timeout "${SANITIZER_TIMEOUT:-400}" compute-sanitizer --tool "$kind" --error-exitcode 9 "$n/tests/$first" --gtest_filter="$rest" \
        > "$log" 2>&1
      echo "$kind exit $?"; tail -2 "$log" ;;
    bench)
      step "ninfer-bench $a"
      log="$(fresh_log "bench-$a" txt)"
      timeout 300 "$n/ninfer/bin/ninfer-bench" --preset "$a" --device cuda --prompt-lengths 4096 --contexts 0,4096 \
        --batches 1,8 --repeats 3 --decode-steps 32 > "$log" 2>&1
      echo "exit $?"; grep -E "^(prefill|decode|bandwidth)" "$log" ;;
    ablation) [[ "$arg" == *=* ]] || a=""
      bash "$here/device-run-ablation.sh" $a 2>&1 | tee -a "$out/ablation.txt" ;;
    routes)
      IFS=+ read -ra entries <<< "$first"
      table_routes_first "${entries[@]}"
      for p in ${rest:-qwen3-8b qwen3_5-27b}; do
        step "routes ${first:-built-in}: $p decode, batch 1, context ${CONTEXTS:-0}"
        log="$(fresh_log "routes-$p-${first//[^a-z0-9_]/_}" txt)"
        "$n/ninfer/bin/ninfer-bench" --preset "$p" --device cuda --skip-prefill --contexts "${CONTEXTS:-0}" --batches 1 \
          --repeats 3 --decode-steps 64 > "$log" 2>&1
        grep -E "^decode|linear |^  batch .* -> " "$log" # the points, the linear routes, the depth growth
        [[ "${NCU:-0}" != 1 ]] || ncu_decode_kernels "$p" linear
      done
      table_restore ;;
    ab) bash "$here/device-run-variant-ab.sh" "$a" "$b" "$c" $d 2>&1 | tee -a "$out/variant-ab.txt" ;;
    *) echo "unknown check: $arg"; sed -n 2,11p "$0"; exit 2 ;;
  esac
done
