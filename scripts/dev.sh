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

# The main job: a chat completion from the trained demo model committed in models/qwen3_5-demo
# (a 7M-parameter Qwen3.5 with its MTP head, tools/train-demo; nothing is downloaded), on the
# best device that runs it. Real checkpoints live in $root/checkpoints/<name>/ (README.md).
run_main() {
  local demo="$root/models/qwen3_5-demo"
  if [[ ! -x "$build_dir/bin/ninfer-run" ]]; then
    echo "dev.sh: no tools in $build_dir/bin: build them first (bash scripts/dev.sh run)" >&2
    exit 1
  fi
  log "ninfer-run on $demo (a toy trained on public-domain text: English, not wisdom)"
  "$build_dir/bin/ninfer-run" --checkpoint "$demo" --chat --prompt "Tell me about Norway." \
    --max-new 64 --temperature 0.7 --top-p 0.9 --seed 1
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
