# Sourced by the CI scripts: `tally PASSED FAILED WHAT` adds one line to the file $CI_TALLY_FILE names (set by
# .ci/run, which sums the lines into its closing `ci: N passed, M failed`); without it, only prints the line.
# ctest_tally DIR LOG: the counts of ctest's own summary line in LOG ("97% tests passed, 3 tests failed out of
# 100"), or one failure when ctest printed none (it could not run the tests at all). The failed tests' names
# (the first 20 of ctest's "The following tests FAILED" list) go into the line, so the log's last lines name them.
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
  tally $((total - failed)) "$failed" "ctest in $1$names"
}
