#!/usr/bin/env bash
# Runs on the device machine after `EXTRA_TESTS=gpu_generic_tests bash scripts/device-bundle.sh`: the cuda-generic plugin and the NVRTC kernel cache checks of
# docs/validation.md, and ninfer-bench on cuda-generic vs cuda-sm90. Logs go to $OUT.
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
# secs OUT ERR CMD...: runs CMD with stdout to OUT and stderr to ERR, prints its wall time.
secs() {
  local o="$1" e="$2"; shift 2
  local t0=$EPOCHREALTIME; "$@" > "$o" 2> "$e"; local rc=$? t1=$EPOCHREALTIME
  python3 -c 'import sys; print("(%.2f s, exit %s)" % (float(sys.argv[2]) - float(sys.argv[1]), sys.argv[3]))' "$t0" "$t1" "$rc"
}

step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
step "ninfer-info: first start (cuda-generic compiles its kernels with NVRTC), then a second (kernel cache)"
secs "$out/info1.txt" "$out/info1.err" "$n/ninfer/bin/ninfer-info"; grep -A8 "H200" "$out/info1.txt" | head -12
secs "$out/info2.txt" "$out/info2.err" "$n/ninfer/bin/ninfer-info"
step "gpu_generic_tests"
timeout 120 "$n/tests/gpu_generic_tests" > "$out/gpu_generic_tests.log" 2>&1; echo "exit $?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|jit-|score" "$out/gpu_generic_tests.log"
prompt="$(python3 -c "import json;print(','.join(map(str,json.load(open('tests/fixtures/tiny-qwen3_5-long/reference.json'))['cases'][0]['prompt_ids'])))")"
for p in cuda-generic cuda-sm90; do
  step "ninfer-run --plugin $p (fixture, greedy, vs transformers ids)"
  secs "$out/run-$p.json" "$out/run-$p.err" "$n/ninfer/bin/ninfer-run" --checkpoint tests/fixtures/tiny-qwen3_5-long \
    --device cuda --plugin $p --greedy --max-new 24 --ignore-eos --prompt-ids "$prompt" --json; tail -2 "$out/run-$p.err"
  python3 - "$out/run-$p.json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["generated_ids"]
ref = json.load(open("tests/fixtures/tiny-qwen3_5-long/reference.json"))["cases"][0]
n = 0
for g, r, m in zip(got, ref["greedy_ids"], ref["greedy_top2_margin"]):
    if m <= 1e-2: break
    assert g == r, (g, r); n += 1
print(f"greedy ids equal transformers' for all {n} steps above the margin")
PY
done
for p in cuda-sm90 cuda-generic; do
  step "ninfer-bench --plugin $p"
  timeout 75 "$n/ninfer/bin/ninfer-bench" --preset qwen3-8b --device cuda --plugin $p --prompt-lengths 512 \
    --contexts 0 --batches 1 --repeats 1 > "$out/bench-$p.txt" 2>&1; echo "exit $?"; cat "$out/bench-$p.txt" | tail -25
done
export NINFER_TEST_PLUGIN=cuda-generic
for t in gpu_tests gpu_model_tests gpu_op_tests; do
  step "$t with NINFER_TEST_PLUGIN=cuda-generic"
  timeout "${GENERIC_TEST_TIMEOUT:-250}" "$n/tests/$t" > "$out/generic-$t.log" 2>&1; echo "exit $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|SKIPPED \] [0-9]" "$out/generic-$t.log"
done
