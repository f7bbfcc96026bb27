#!/usr/bin/env bash
# Installs dependencies, builds, and runs kiln's whole test suite with ctest.
# Usage: bash ci/test.sh              RelWithDebInfo build in build/
#        bash ci/test.sh --sanitize   ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
if [[ ${1:-} == --sanitize ]]; then
  bash ci/build.sh build-asan -DKILN_SANITIZE=ON -DKILN_BUILD_BENCH=OFF
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
  ctest --test-dir build-asan --output-on-failure -j2
else
  bash ci/build.sh build
  ctest --test-dir build --output-on-failure -j2
fi
