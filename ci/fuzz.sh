#!/usr/bin/env bash
# Fuzzes the .kir parser and verifier: builds fuzz/kir_fuzzer.cpp with clang-19, libFuzzer, ASan and UBSan
# (-DKILN_FUZZ=ON, in build-fuzz/) and runs it for a fixed time over the seeds in fuzz/corpus/kir/. Exits non-zero
# on a finding (a crash, a sanitizer report, an exception other than kiln::Error, a round-trip mismatch, a
# timeout or running out of memory); the input that triggers it is left in build-fuzz/findings/.
# Usage: bash ci/fuzz.sh [SECONDS]   (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-60}
dir=build-fuzz

bash ci/install-deps.sh  # clang-19, libclang-rt-19-dev (libFuzzer), libomp-19-dev (OpenMP for clang)
CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" -G Ninja -DKILN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" --target kir-fuzzer

# The fuzzer adds what it learns to a working corpus under build-fuzz/; the checked-in seeds stay small.
work="$dir/corpus-kir"
findings="$dir/findings"
mkdir -p "$work" "$findings"
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$dir/fuzz/kir-fuzzer" "$work" fuzz/corpus/kir -dict=fuzz/kir.dict -max_total_time="$budget" -timeout=5 \
  -rss_limit_mb=4096 -max_len=8192 -artifact_prefix="$findings/" -print_final_stats=1
echo "fuzz.sh: no findings in ${budget}s"
