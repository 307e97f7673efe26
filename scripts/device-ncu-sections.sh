#!/usr/bin/env bash
# Runs on the device: ncu's analysis sections (speed of light, occupancy, warp stalls, memory
# workload, launch) for chosen kernels of one eager decode step, caches flushed before each
# kernel, so one kernel's streaming behaviour can be read on its own. CONTEXT=N (default 0): the
# step runs at that context depth (the cache is filled by a prefill first, whose kernels the regex
# must not match); SOURCE=1 adds the warp-stall samples per SASS line (the 12 hottest lines).
#   bash scripts/device-ncu-sections.sh PRESET KERNEL_REGEX SKIP COUNT     logs: $OUT (or ./gpu-logs)
#   e.g. bash scripts/device-ncu-sections.sh qwen3-8b 'ninfer_linear_gemv_cc1_bf16|ninfer_norm_linear_bf16' 20 4
set -uo pipefail
[[ $# -eq 4 ]] || { sed -n 2,6p "$0"; exit 2; }
out="${OUT:-$PWD/gpu-logs}"
mkdir -p "$out"
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
ensure_bundle
export NINFER_CACHE_DIR=/tmp/ninfer-kernel-cache
log="$out/ncu-sections-$1-$3-ctx${CONTEXT:-0}.txt"
extra=()
[[ "${SOURCE:-0}" != 1 ]] || extra=(--section SourceCounters --export "$out/ncu-$1-$3" --force-overwrite)
step "ncu sections: $1, kernels /$2/ from match $3, $4 of them"
ncu --clock-control none --cache-control all --kernel-name "regex:$2" --launch-skip "$3" --launch-count "$4" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section LaunchStats "${extra[@]}" "$n/ninfer/bin/ninfer-bench" --preset "$1" --device cuda --skip-prefill --contexts "${CONTEXT:-0}" \
  --batches 1 --warmup 0 --repeats 1 --decode-steps 1 --no-cuda-graph > "$log" 2>&1
echo "exit $?"
# An exported report is not printed: read its sections back into the log.
[[ "${SOURCE:-0}" != 1 ]] || ncu --import "$out/ncu-$1-$3.ncu-rep" --page details >> "$log" 2>&1
grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Registers Per|Grid Size|Block Limit Reg|Stall Long|Warp Cycles Per Issued|L2 Hit Rate|Mem Busy|Max Bandwidth|Dynamic Shared" "$log" | head -120
if [[ "${SOURCE:-0}" == 1 ]]; then
  ncu --import "$out/ncu-$1-$3.ncu-rep" --page source --print-source sass --csv > "$out/ncu-source-$1-$3.csv" 2>&1
  python3 - "$out/ncu-source-$1-$3.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next((i for i, r in enumerate(rows) if any("Warp Stall Sampling" in c for c in r)), None)
if head is None: print("no source table"); sys.exit()
h = rows[head]; col = next(i for i, c in enumerate(h) if c.startswith("Warp Stall Sampling (All"))
src = next((i for i, c in enumerate(h) if c == "Source"), 1)
# The first kernel's table only: each profiled launch repeats it after its own "Kernel Name" row.
end = next((i for i in range(head + 1, len(rows)) if rows[i] and rows[i][0] == "Kernel Name"), len(rows))
body = [r for r in rows[head + 1:end] if len(r) > col and r[col].replace(".", "").isdigit()]
total = sum(float(r[col]) for r in body) or 1
for r in sorted(body, key=lambda r: -float(r[col]))[:12]: print(f"{100*float(r[col])/total:5.1f}%  {r[src][:110]}")
PY
fi
