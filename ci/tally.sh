# Sourced by the CI scripts: `tally PASSED FAILED WHAT` adds one line to the file $CI_TALLY_FILE names (set by
# .ci/run, which sums the lines into its closing `ci: N passed, M failed`); without it, only prints the line.
# ctest_tally DIR LOG: the counts of ctest's own summary line in LOG ("97% tests passed, 3 tests failed out of
# 100"), or one failure when ctest printed none (it could not run the tests at all). The failed tests' names
# (the first 20 of ctest's "The following tests FAILED" list) go into the line, so the log's last lines name them.
# Skipped tests (GTEST_SKIP: the GPU tests on a machine without one) are reported apart, not counted as passed.
# gtest_xml_tally DIR LOG XMLDIR: the same for a tree whose ctest tests are GoogleTest suites (the sanitized tree,
# tests/gtest_suites.cmake): every test of every suite counted from the suites' XML reports, plus one failure for
# each failed suite whose report names no failed test (it crashed, timed out, or LeakSanitizer failed it at exit).
tally() {
  echo "tally: $1 passed, $2 failed: $3"
  if [[ -n ${CI_TALLY_FILE:-} ]]; then printf '%s %s %s\n' "$1" "$2" "$3" >> "$CI_TALLY_FILE"; fi
}
ctest_tally() {
  local line total failed
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$2" | tail -n 1 || true)
  if [[ -z $line ]]; then tally 0 1 "ctest in $1 printed no summary"; return; fi
  total=${line##* out of }
  failed=$(sed -E 's/^[0-9]+% tests passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  local names=""
  if ((failed > 0)); then
    names=$(sed -n '/^The following tests FAILED:/,$p' "$2" | sed -n -E 's/^[[:space:]]*[0-9]+ - ([^ ]+).*/\1/p' |
      head -n 20 | paste -sd' ' -)
    ((failed > 20)) && names+=" ..."
    names=" (failed: $names)"
  fi
  local skipped
  skipped=$(skipped_count "$2")
  tally $((total - failed - skipped)) "$failed" "ctest in $1$names$(skipped_note "$skipped")"
}
# ctest's "The following tests did not run:" entries, `  123 - Name (Skipped)`.
skipped_count() {
  awk '/^The following tests did not run:/ { on = 1; next } on && !/^[[:space:]]+[0-9]+ - / { on = 0 }
       on && /\(Skipped\)$/ { n++ } END { print n + 0 }' "$1"
}
skipped_note() { if (($1 > 0)); then echo "; $1 skipped, not counted"; fi; }
failed_ctest_names() {
  sed -n '/^The following tests FAILED:/,$p' "$1" | sed -n -E 's/^[[:space:]]*[0-9]+ - ([^ ]+).*/\1/p'
}
gtest_xml_tally() {
  local dir=$1 log=$2 xmldir=$3 line
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ -z $line ]]; then tally 0 1 "ctest in $dir printed no summary"; return; fi
  local counts tests failures disabled skipped suites=${line##* out of }
  # Each report's <testsuite tests= failures= disabled= skipped=> attributes, summed.
  counts=$(cat "$xmldir"/*.xml 2>/dev/null | awk '/<testsuite / {
      for (i = 1; i <= NF; ++i) if (match($i, /^(tests|failures|disabled|skipped)="[0-9]+"/)) {
        split($i, kv, "\""); n[substr($i, 1, index($i, "=") - 1)] += kv[2] }
    } END { print n["tests"] + 0, n["failures"] + 0, n["disabled"] + 0, n["skipped"] + 0 }')
  read -r tests failures disabled skipped <<<"$counts"
  local suite xml unexplained=0 names=""
  while read -r suite; do
    [[ -z $suite ]] && continue
    names+=" $suite"
    xml="$xmldir/${suite//\//_}.xml"
    if [[ ! -f $xml ]] || ! grep -q -E '<testsuite [^>]*failures="[1-9]' "$xml"; then
      unexplained=$((unexplained + 1))
    fi
  done < <(failed_ctest_names "$log")
  [[ -n $names ]] && names=" (failed suites:$names)"
  tally $((tests - failures - disabled - skipped)) $((failures + unexplained)) \
    "ctest in $dir: $tests tests in $suites suites$names$(skipped_note "$skipped")"
}
