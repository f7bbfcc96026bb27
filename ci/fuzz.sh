#!/usr/bin/env bash
# Fuzzes the .kir parser and verifier (fuzz/kir_fuzzer.cpp), the repro file parser (fuzz/repro_fuzzer.cpp) and,
# structure-aware, the compiler (fuzz/graph_fuzzer.cpp: input bytes are the graph generator's choices; each
# graph runs on the inductor against the fp64 reference): builds them in the sanitized tree build-asan/
# (clang-19, libFuzzer, ASan and UBSan: ci/build.sh --sanitize, shared with ci/test.sh --sanitize) and runs
# each for its share of a fixed time (half .kir, a quarter repro, a quarter graph) over the seeds in
# fuzz/corpus/<target>/. Exits non-zero on a finding (a crash, a sanitizer report, an exception other than
# kiln::Error, a round-trip mismatch, a backend error or mismatch on a generated graph, a timeout or running
# out of memory); the input that triggers it is left in build-asan/findings/.
# Usage: bash ci/fuzz.sh [SECONDS]   (default 60). Every fuzzer runs even after another's finding.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-60}
dir=build-asan

bash ci/install-deps.sh  # clang-19, libclang-rt-19-dev (libFuzzer)
bash ci/build.sh --sanitize kir-fuzzer repro-fuzzer graph-fuzzer

# Each fuzzer adds what it learns to a working corpus under build-asan/; the checked-in seeds stay small.
findings="$dir/findings"
mkdir -p "$findings"
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
source ci/tally.sh
status=0
fuzz() {  # target, seconds; each fuzzer run is tallied as one check: passed when it found nothing
  mkdir -p "$dir/corpus-$1"
  local dict=(); [[ -f "fuzz/$1.dict" ]] && dict=(-dict="fuzz/$1.dict")
  if "$dir/fuzz/$1-fuzzer" "$dir/corpus-$1" "fuzz/corpus/$1" "${dict[@]}" -max_total_time="$2" -timeout=5 \
       -rss_limit_mb=4096 -max_len=8192 -artifact_prefix="$findings/$1-" -print_final_stats=1; then
    tally 1 0 "libFuzzer $1-fuzzer, $2 s: no findings"
  else
    tally 0 1 "libFuzzer $1-fuzzer, $2 s: a finding in $findings/"
    status=1
  fi
}
kir_budget=$(( budget / 2 )) repro_budget=$(( budget / 4 ))
fuzz kir "$(( kir_budget > 0 ? kir_budget : 1 ))"
fuzz repro "$(( repro_budget > 0 ? repro_budget : 1 ))"
fuzz graph "$(( budget - kir_budget - repro_budget > 0 ? budget - kir_budget - repro_budget : 1 ))"
if ((status == 0)); then echo "fuzz.sh: no findings in ${budget}s"; else echo "fuzz.sh: findings in $findings/"; fi
exit "$status"
