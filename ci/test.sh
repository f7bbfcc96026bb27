#!/usr/bin/env bash
# Installs dependencies, builds, and runs kiln's whole test suite with ctest.
# Usage: bash ci/test.sh              RelWithDebInfo build in build/
#        bash ci/test.sh --sanitize   ASan + UBSan build in build-asan/ (clang-19; the tree ci/fuzz.sh fuzzes from)
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh

source ci/tally.sh

# ctest over DIR, its counts tallied (ci/tally.sh; a tree with gtest-xml/ registers GoogleTest suites, not tests,
# and is counted from their reports: tests/gtest_suites.cmake); when tests fail, each failed test runs again alone and its
# assertion messages are printed last, where a CI log's tail shows them (the first run's output of a failure is
# buried among 2000 tests). The re-run only explains: its verdict is the first run's, and none of its own closing
# lines (ctest's "N% tests passed" or "No tests were found") is printed, so nothing after the real summary reads
# as one.
ctest_or_explain() {
  local dir=$1 log rc=0
  shift
  log=$(mktemp)
  local xmldir="$dir/gtest-xml"
  if [[ -d $xmldir ]]; then rm -f "$xmldir"/*.xml; fi  # only this run's reports are counted
  ctest --test-dir "$dir" --output-on-failure -j2 "$@" 2>&1 | tee "$log" || rc=$?
  if [[ -d $xmldir ]]; then gtest_xml_tally "$dir" "$log" "$xmldir"; else ctest_tally "$dir" "$log"; fi
  if ((rc == 0)); then rm -f "$log"; return 0; fi
  echo "=== the failed tests, run again one at a time: their failures ==="
  ctest --test-dir "$dir" --rerun-failed --output-on-failure -j1 "$@" > "$log.rerun" 2>&1 || true
  grep -E -A12 "Failure$|Failure\b|error: |Which is:|Expected|Falsifiable|Tests? #|Passed|Failed" "$log.rerun" |
    grep -v -E "^[0-9]+% tests passed|tests? failed out of|No tests were found|^Total Test time" |
    cut -c1-400 | tail -n 120 || true
  echo "=== end of the re-run (it does not change the verdict: ctest in $dir failed) ==="
  rm -f "$log" "$log.rerun"
  return 1
}
# kiln gate over DIR, its entries tallied: a regression is a failure; passed, known failures and fixed entries
# pass (docs/gate.md); skipped entries are not counted.
gate_and_tally() {
  local what=$1 log rc=0 line entries regressed skipped
  shift
  log=$(mktemp)
  build/kiln gate "$@" 2>&1 | tee "$log" || rc=$?
  line=$(grep -E '^[0-9]+ entries: ' "$log" | tail -n 1 || true)
  rm -f "$log"
  if [[ -z $line ]]; then tally 0 1 "kiln gate $what printed no summary (exit $rc)"; return 1; fi
  entries=$(sed -E 's/^([0-9]+) entries:.*/\1/' <<<"$line")
  regressed=$(sed -E 's/.* ([0-9]+) regressed.*/\1/' <<<"$line")
  skipped=$(sed -E 's/.* ([0-9]+) skipped.*/\1/' <<<"$line")
  if ((rc != 0 && regressed == 0)); then regressed=1; fi  # failed for a reason its summary does not count
  tally $((entries - regressed - skipped)) "$regressed" "kiln gate $what"
  return "$rc"
}
if [[ ${1:-} == --sanitize ]]; then
  bash ci/build.sh --sanitize
  # allow_user_segv_handler: the isolated runner's child restores the default SIGSEGV action so a crash is a
  # signal, not an ASan report. detect_leaks=1: a leak fails its test (forked children end with _exit and are
  # not checked; tests/test_autograd_cycles.cpp checks autograd's histories without the sanitizer too).
  export ASAN_OPTIONS=detect_leaks=1:allow_user_segv_handler=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
  # The timing test (tests/timing/, RUN_SERIAL: it holds both cores while it measures) runs in the optimised tree
  # only: under the sanitizers its times mean nothing, and the bench code it drives runs sanitized in Bench.*.
  ctest_or_explain build-asan -E '^timing\.'
else
  bash ci/build.sh build -DKILN_BUILD_BENCH=OFF  # the benchmarks are not tests; bench/ builds them (ON by default)
  status=0
  ctest_or_explain build || status=1
  # kiln gates itself as a user's CI would (docs/gate.md): every example compiles, runs and matches the fp64
  # reference on the inductor, and every repro of a fixed bug stays fixed.
  gate_and_tally examples examples --backend inductor --junit build/gate-examples.xml || status=1
  if compgen -G "tests/repros/*.repro" >/dev/null; then
    gate_and_tally tests/repros tests/repros --junit build/gate-repros.xml || status=1
  fi
  exit "$status"
fi
