#!/usr/bin/env bash
# Installs every Debian package kiln needs to build, test and benchmark (idempotent: a no-op when present).
# Usage: bash ci/install-deps.sh [--build]   --build: only what building needs (.clusterfuzzlite/Dockerfile)
set -euo pipefail
packages=(build-essential cmake ninja-build git pkg-config
          llvm-19-dev clang-19 libclang-rt-19-dev libomp-19-dev  # libomp-19-dev: only the omp.h clang reads (CMakeLists.txt)
          libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
          libopenblas-openmp-dev libdnnl-dev libcli11-dev nlohmann-json3-dev libboost-graph-dev libminizip-dev)
if [[ ${1:-} != --build ]]; then
  packages+=(python3 python3-numpy
             python3-torch chromium)  # python3-torch (PyTorch 1.13): the tests run the scripts `--emit torch`
                                      # writes (eager only); chromium: headless, renders `kiln bench report`'s page
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
