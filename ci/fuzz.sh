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

# Debian's clang-19 comes without an OpenMP runtime unless libomp-19-dev is installed; borrow the newest
# installed LLVM libomp and its omp.h instead.
omp=()
if [[ ! -f "$(clang++-19 -print-resource-dir)/include/omp.h" ]]; then
  omp_h=$(ls /usr/lib/llvm-*/lib/clang/*/include/omp.h 2>/dev/null | sort -V | tail -1)
  omp_lib=$(ls /usr/lib/llvm-*/lib/libomp.so 2>/dev/null | sort -V | tail -1)
  if [[ -z $omp_h || -z $omp_lib ]]; then
    echo "fuzz.sh: clang-19 needs an OpenMP runtime: apt-get install libomp-19-dev (or libomp-dev)" >&2
    exit 1
  fi
  mkdir -p "$dir/omp-include"
  ln -sf "$omp_h" "$dir/omp-include/omp.h"
  flags="-fopenmp=libomp -I$PWD/$dir/omp-include"
  omp=("-DOpenMP_CXX_FLAGS=$flags" "-DOpenMP_C_FLAGS=$flags" -DOpenMP_CXX_LIB_NAMES=omp -DOpenMP_C_LIB_NAMES=omp
       "-DOpenMP_omp_LIBRARY=$omp_lib")
fi
CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" -G Ninja -DKILN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${omp[@]}" >/dev/null
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
