#!/usr/bin/env bash
# Installs dependencies, builds, and runs kiln's whole test suite with ctest.
# Usage: bash ci/test.sh              RelWithDebInfo build in build/
#        bash ci/test.sh --sanitize   ASan + UBSan build in build-asan/ (clang-19; the tree ci/fuzz.sh fuzzes from)
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh

# ctest over DIR; when tests fail, each failed test runs again alone and its assertion messages are printed last,
# where a CI log's tail shows them (the first run's output of a failure is buried among 2000 tests).
# One failure is accepted, in the sanitized tree only, when it passes on that re-run and was the known start-up
# crash: the ASan tree links LLVM's libomp, which OpenBLAS's constructor starts before main, and about one process
# start in 1500 dies there with SIGBUS (`in gotoblas_init` in ASan's report) before any test code runs. Building
# that tree against GNU's libgomp is the fix (the closing note of 2026-11-28).
ctest_or_explain() {
  local dir=$1 sanitized=${2:-} log
  log=$(mktemp)
  if ctest --test-dir "$dir" --output-on-failure -j2 2>&1 | tee "$log"; then rm -f "$log"; return 0; fi
  local failed known rerun_ok=""
  failed=$(grep -c -E '\*\*\*(Failed|Exception)' "$log" || true)
  known=$(grep -c 'in gotoblas_init' "$log" || true)
  echo "=== the failed tests, run again one at a time: their failures ==="
  if ctest --test-dir "$dir" --rerun-failed --output-on-failure -j1 > "$log.rerun" 2>&1; then rerun_ok=1; fi
  grep -E -A12 "Failure$|Failure\b|error: |Which is:|Expected|Falsifiable|Tests? #|Passed|Failed" "$log.rerun" |
    cut -c1-400 | tail -n 120 || true
  tail -n 3 "$log.rerun"
  rm -f "$log" "$log.rerun"
  if [[ -n $sanitized && -n $rerun_ok && $failed -gt 0 && $known -ge $failed ]]; then
    echo "ci/test.sh: the $failed failure(s) above were the sanitized tree's start-up SIGBUS under OpenBLAS's" \
         "constructor (gotoblas_init) before any test ran, and pass on a re-run: accepted"
    return 0
  fi
  return 1
}
if [[ ${1:-} == --sanitize ]]; then
  bash ci/build.sh --sanitize
  # allow_user_segv_handler: the isolated runner's child restores the default SIGSEGV action so a crash is a
  # signal, not an ASan report. detect_leaks=1: a leak fails its test (forked children end with _exit and are
  # not checked; tests/test_autograd_cycles.cpp checks autograd's histories without the sanitizer too).
  export ASAN_OPTIONS=detect_leaks=1:allow_user_segv_handler=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
  ctest_or_explain build-asan sanitized
else
  bash ci/build.sh build -DKILN_BUILD_BENCH=OFF  # the benchmarks are not tests; bench/ builds them (ON by default)
  ctest_or_explain build
  # kiln gates itself as a user's CI would (docs/gate.md): every example compiles, runs and matches the fp64
  # reference on the inductor, and every repro of a fixed bug stays fixed.
  build/kiln gate examples --backend inductor --junit build/gate-examples.xml
  if compgen -G "tests/repros/*.repro" >/dev/null; then
    build/kiln gate tests/repros --junit build/gate-repros.xml
  fi
fi
