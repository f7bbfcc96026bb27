#!/usr/bin/env bash
# Configures and builds kiln into a build directory.
# Usage: bash ci/build.sh [DIR] [extra cmake flags...]   (DIR defaults to build)
#        bash ci/build.sh --sanitize [--configure] [TARGET...]
#                                                      the one sanitized tree, build-asan/: clang-19, ASan + UBSan,
#                                                      coverage instrumentation and the libFuzzer targets
#                                                      (-DKILN_FUZZ=ON). ci/test.sh --sanitize runs the test suite
#                                                      from it and ci/fuzz.sh the fuzzers, so CI compiles the
#                                                      sanitized library once. No TARGET: everything;
#                                                      --configure: configure only (ci/fuzz.sh checks the flags).
#        The sanitized tree is configured here only. An OSS-Fuzz or ClusterFuzzLite build (.clusterfuzzlite/build.sh)
#        configures it through the same line with its own compiler, flags and engine: KILN_SANITIZE_BUILD_DIR (the
#        tree; default build-asan), KILN_SANITIZE_CC and KILN_SANITIZE_CXX (default clang-19, clang++-19), CFLAGS
#        and CXXFLAGS (when they name a -fsanitize=, kiln adds no sanitizer flags of its own) and
#        LIB_FUZZING_ENGINE (how targets link the engine; default -fsanitize=fuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --sanitize ]]; then
  shift
  configure_only=false
  if [[ ${1:-} == --configure ]]; then configure_only=true; shift; fi
  dir=${KILN_SANITIZE_BUILD_DIR:-build-asan}
  CC=${KILN_SANITIZE_CC:-clang-19} CXX=${KILN_SANITIZE_CXX:-clang++-19} cmake -S . -B "$dir" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_BUILD_BENCH=OFF -DCMAKE_C_FLAGS="${CFLAGS:-}" \
    -DCMAKE_CXX_FLAGS="${CXXFLAGS:-}" -DKILN_FUZZ_ENGINE="${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}" >/dev/null
  $configure_only && exit 0
  targets=(); for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$dir" "${targets[@]}"
  exit 0
fi
dir=${1:-build}
shift || true
cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
cmake --build "$dir"
