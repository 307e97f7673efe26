#!/usr/bin/env bash
# Runs on the device: ncu's analysis sections (speed of light, occupancy, warp stalls, memory
# workload, launch) for chosen kernels of one eager decode step, caches flushed before each
# kernel, so one kernel's streaming behaviour can be read on its own.
#   bash scripts/device-ncu-sections.sh PRESET KERNEL_REGEX SKIP COUNT     logs: $OUT (or ./gpu-logs)
#   e.g. bash scripts/device-ncu-sections.sh qwen3-8b 'ninfer_linear_gemv_cc1_bf16|ninfer_norm_linear_bf16' 20 4
set -uo pipefail
[[ $# -eq 4 ]] || { sed -n 2,6p "$0"; exit 2; }
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
ensure_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
log="$out/ncu-sections-$1-$3.txt"
step "ncu sections: $1, kernels /$2/ from match $3, $4 of them"
ncu --clock-control none --cache-control all --kernel-name "regex:$2" --launch-skip "$3" --launch-count "$4" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats "$n/ninfer/bin/ninfer-bench" --preset "$1" --device cuda --skip-prefill --contexts 0 \
  --batches 1 --warmup 0 --repeats 1 --decode-steps 1 --no-cuda-graph > "$log" 2>&1
echo "exit $?"
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Registers Per|Grid Size|Block Limit Reg|Stall Long|Warp Cycles Per Issued|L2 Hit Rate|Mem Busy|Max Bandwidth|Dynamic Shared" "$log" | head -120
