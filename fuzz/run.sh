#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, in build-fuzz/) and fuzzes each for a
# while, starting from fuzz/corpus/<target>. New inputs go to build-fuzz/fuzz/work/<target>
# (not the repository's corpus); a finding is written to build-fuzz/fuzz/findings/<target>/.
#   fuzz/run.sh [SECONDS_PER_TARGET [TARGET...]]     default: 60 s each, every target
# FUZZ_BUILD_DIR (default build-fuzz) and JOBS (default: all cores) can be set. openai_request
# needs the CPU plugin of a plain build (BUILD_DIR, default build/; clang 14 cannot build it).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${JOBS:-$(nproc)}"
seconds="${1:-60}"
shift || true
targets=("$@")
((${#targets[@]})) || targets=(manifest config_json safetensors_header tokenizer_json openai_request)

command -v clang++ >/dev/null || { echo "needs clang and libFuzzer: apt-get install clang libclang-rt-14-dev" >&2; exit 2; }
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNINFER_CUDA=OFF -DNINFER_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]/#/fuzz-}"

plain_plugins="${BUILD_DIR:-$root/build}/lib/ninfer/plugins"
status=0
for t in "${targets[@]}"; do
  if [[ $t == openai_request && ! -f $plain_plugins/libcpu.so ]]; then
    echo "== $t: skipped, no CPU plugin at $plain_plugins (build one: scripts/dev.sh build, or set BUILD_DIR)"
    continue
  fi
  work="$build_dir/fuzz/work/$t" findings="$build_dir/fuzz/findings/$t"
  mkdir -p "$work" "$findings"
  echo "== $t: $seconds s"
  # max_len bounds mutated inputs (the corpus holds a few larger regression cases, replayed whole);
  # rss_limit_mb/malloc_limit_mb: an input that needs more memory than this is a finding.
  if ! NINFER_PLUGIN_DIR="$plain_plugins" "$build_dir/fuzz/fuzz-$t" "$work" "$root/fuzz/corpus/$t" -max_total_time="$seconds" -max_len=8192 \
         -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -artifact_prefix="$findings/" \
         -print_final_stats=1 2>"$build_dir/fuzz/$t.log"; then
    status=1
    echo "   finding: $(ls -t "$findings" | head -1) (log: $build_dir/fuzz/$t.log)"
    grep -m3 -E "ERROR|unexpected exception|runtime error" "$build_dir/fuzz/$t.log" || true
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build_dir/fuzz/$t.log" | tr '\n' ' '; echo
done
exit $status
