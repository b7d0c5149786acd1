#!/usr/bin/env bash
# dev.sh — the README's two commands, for a fresh Debian 12 machine:
#
#   scripts/dev.sh run [options]   install missing packages, build, run the default job
#                                  (options go to `salamander run`, e.g. --steps 1000)
#   scripts/dev.sh test            install missing packages, build, run every test (CTest)
#
# Packages are installed with apt-get (through sudo when not root) only if missing. The build goes
# to build/ (CMake + Ninja); the CUDA path is built when nvcc is found (SAL_CMAKE_ARGS adds flags,
# e.g. SAL_CMAKE_ARGS=-DSAL_ENABLE_CUDA=OFF).
set -euo pipefail

cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  mold  # the linker (CMakeLists.txt: SAL_LINKER); the build links some 55 programs
  libluajit-5.1-dev libzmq3-dev cppzmq-dev libuv1-dev libspdlog-dev doctest-dev libedit-dev
  libmsgpack-cxx-dev nlohmann-json3-dev libopenblas-dev libgloo-dev
  libucx-dev  # UCX: the CPU data plane's shared-memory path between workers on one host
  prometheus-cpp-dev  # the controller's Prometheus endpoint (metrics.bind)
  libsodium-dev  # the sparse snapshot slices' keyed MAC (engine/ckpt/slice_mac.h)
  libssl-dev  # HTTPS in front of the metrics endpoint (engine/comm/tls_front.h, metrics.tls)
  libsentencepiece-dev  # tokenizers: salamander data prepare and sample (engine/tokens/tokenizer.h)
  fortunes  # the default job's training text (/usr/share/games/fortunes)
  chromium libpng-dev  # t0320 renders a run's report.html headless and reads the screenshot
  python3  # tests/ckpt/hf_import.py: the imported model against a forward pass in plain Python
)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build() {
  if [ ! -f build/CMakeCache.txt ]; then
    # Without a GPU the CUDA path is built only to see that it compiles: one architecture does (a
    # fifth less of each .cu file's compile time). SAL_CMAKE_ARGS, after it, can name others.
    local arch=""
    nvidia-smi -L >/dev/null 2>&1 || arch="-DCMAKE_CUDA_ARCHITECTURES=90"
    # shellcheck disable=SC2086
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $arch ${SAL_CMAKE_ARGS:-}
  fi
  cmake --build build >&2  # stdout stays for the run itself: its first line is the REPL endpoint
}

case "${1:-}" in
  run)
    shift
    install_missing
    build
    exec build/salamander run "$@"
    ;;
  test)
    install_missing
    build
    exec ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 300
    ;;
  *)
    echo "usage: scripts/dev.sh run [salamander run options] | scripts/dev.sh test" >&2
    exit 2
    ;;
esac
