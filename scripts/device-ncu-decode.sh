source scripts/device-env.sh; [[ -d "$n/ninfer" ]] || unpack_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
timeout 120 $n/tests/gpu_op_tests --gtest_filter='NormLinearGpu.*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|exception" | head
for p in qwen3-8b; do
ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv $n/ninfer/bin/ninfer-bench --preset $p --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 --decode-steps 2 --no-cuda-graph > /tmp/ncu-$p.csv 2>/dev/null
python3 scripts/ncu-summary.py --steps 2 /tmp/ncu-$p.csv | head -24
done
