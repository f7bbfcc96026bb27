#!/usr/bin/env bash
# Configures and builds kiln into a build directory.
# Usage: bash ci/build.sh [DIR] [extra cmake flags...]   (DIR defaults to build)
#        bash ci/build.sh --sanitize [TARGET...]       the one sanitized tree, build-asan/: clang-19, ASan + UBSan,
#                                                      coverage instrumentation and the libFuzzer targets
#                                                      (-DKILN_FUZZ=ON). ci/test.sh --sanitize runs the test suite
#                                                      from it and ci/fuzz.sh the fuzzers, so CI compiles the
#                                                      sanitized library once. No TARGET: everything.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --sanitize ]]; then
  shift
  CC=clang-19 CXX=clang++-19 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
    -DKILN_BUILD_BENCH=OFF >/dev/null
  targets=(); for t in "$@"; do targets+=(--target "$t"); done
  cmake --build build-asan "${targets[@]}"
  exit 0
fi
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
cmake --build "$dir"
