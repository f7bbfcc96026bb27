#!/usr/bin/env bash
# Fuzzes the .kir parser and verifier (fuzz/kir_fuzzer.cpp), the repro file parser (fuzz/repro_fuzzer.cpp) and,
# structure-aware, the compiler (fuzz/graph_fuzzer.cpp: input bytes are the graph generator's choices; each
# graph runs on the inductor against the fp64 reference). The targets are built as ClusterFuzzLite and OSS-Fuzz
# build them, by .clusterfuzzlite/build.sh, into an OSS-Fuzz-style $OUT (build-asan/clusterfuzzlite/out: each
# target, its zipped seeds and dictionary, the libraries it loads), on the sanitized tree build-asan/ (clang-19,
# libFuzzer, ASan and UBSan: ci/build.sh --sanitize, shared with ci/test.sh --sanitize). That output is checked
# (each target in it runs over its unzipped seed corpus and loads its libraries from $OUT/lib), then each target
# is run from $OUT for its share of a fixed time (half .kir, a quarter repro, a quarter graph). Exits non-zero
# on a finding (a crash, a sanitizer report, an exception other than kiln::Error, a round-trip mismatch, a
# backend error or mismatch on a generated graph, a timeout or running out of memory); the input that triggers
# it is left in build-asan/findings/.
# Usage: bash ci/fuzz.sh [SECONDS]   (default 60). Every fuzzer runs even after another's finding.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-60}
dir=build-asan

bash ci/install-deps.sh  # clang-19, libclang-rt-19-dev (libFuzzer)
out=$dir/clusterfuzzlite/out
rm -rf "$out"
OUT=$out KILN_SANITIZE_BUILD_DIR=$dir bash .clusterfuzzlite/build.sh

# Each fuzzer adds what it learns to a working corpus under build-asan/; the checked-in seeds stay small.
findings="$dir/findings"
mkdir -p "$findings"
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
source ci/tally.sh
status=0
# What OSS-Fuzz would run: the target in $OUT, over the seeds it unpacks from <target>_seed_corpus.zip, with the
# libraries it loads found in $OUT/lib (never where the build found them).
is_c_library() { [[ $1 =~ ^(libc|libm|libpthread|libdl|librt|libresolv)\.so|^ld-linux ]]; }
library_outside_out() {  # target: prints the first library (not the C library's) it loads from outside $OUT/lib
  local soname arrow path rest
  while read -r soname arrow path rest; do
    [[ $arrow == "=>" ]] || continue
    is_c_library "$soname" && continue
    [[ $(realpath "$path") == "$(realpath "$out")/lib/$soname" ]] || { echo "$soname => $path"; return; }
  done < <(ldd "$1")
}
check_output() {  # target name (kir, repro, graph); tallied as one check
  local target=$1-fuzzer seeds="$dir/clusterfuzzlite/seeds-$1" problem="" outside
  rm -rf "$seeds"; mkdir -p "$seeds"
  outside=$(library_outside_out "$out/$target")
  if ! (cd "$seeds" && cmake -E tar xf "$OLDPWD/$out/${target}_seed_corpus.zip"); then
    problem="its seed corpus does not unzip"
  elif (($(ls "$seeds" | wc -l) != $(ls "fuzz/corpus/$1" | wc -l))); then
    problem="its seed corpus holds $(ls "$seeds" | wc -l) of fuzz/corpus/$1's $(ls "fuzz/corpus/$1" | wc -l) files"
  elif [[ -f fuzz/$1.dict ]] && ! cmp -s "fuzz/$1.dict" "$out/$target.dict"; then
    problem="its dictionary is not fuzz/$1.dict"
  elif [[ -n $outside ]]; then
    problem="it loads a library from outside \$OUT/lib: $outside"
  elif ! "$out/$target" -runs=0 "$seeds" > "$dir/clusterfuzzlite/$target-seeds.log" 2>&1; then
    problem="it fails on its own seeds ($dir/clusterfuzzlite/$target-seeds.log)"
  fi
  if [[ -z $problem ]]; then
    tally 1 0 "clusterfuzzlite/build.sh: $target in \$OUT runs over its seeds, libraries from \$OUT/lib"
  else
    tally 0 1 "clusterfuzzlite/build.sh: $target: $problem"
    status=1
  fi
}
fuzz() {  # target, seconds; each fuzzer run is tallied as one check: passed when it found nothing
  mkdir -p "$dir/corpus-$1"
  local dict=(); [[ -f "$out/$1-fuzzer.dict" ]] && dict=(-dict="$out/$1-fuzzer.dict")
  if "$out/$1-fuzzer" "$dir/corpus-$1" "$dir/clusterfuzzlite/seeds-$1" "${dict[@]}" -max_total_time="$2" \
       -timeout=5 -rss_limit_mb=4096 -max_len=8192 -artifact_prefix="$findings/$1-" -print_final_stats=1; then
    tally 1 0 "libFuzzer $1-fuzzer, $2 s: no findings"
  else
    tally 0 1 "libFuzzer $1-fuzzer, $2 s: a finding in $findings/"
    status=1
  fi
}
# An OSS-Fuzz build configures the same tree with its own flags and engine: kiln then adds no sanitizer flags of
# its own, and the targets link the engine it names (configured only: a second sanitized build would double
# this step's time). Tallied as one check.
check_engine_flags() {
  local tree=$dir/clusterfuzzlite/engine-flags problem="" engine=/usr/lib/libFuzzingEngine.a
  local oss_fuzz_flags="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
  rm -rf "$tree"
  if ! KILN_SANITIZE_BUILD_DIR=$tree CFLAGS=$oss_fuzz_flags CXXFLAGS=$oss_fuzz_flags LIB_FUZZING_ENGINE=$engine \
       bash ci/build.sh --sanitize --configure > "$tree.log" 2>&1; then
    problem="configuring with OSS-Fuzz's flags failed ($tree.log)"
  elif ! grep -q -- "-fsanitize-address-use-after-scope" "$tree/compile_commands.json"; then
    problem="OSS-Fuzz's CXXFLAGS are not in the compile commands"
  elif grep -q -- "-fsanitize=address,undefined" "$tree/compile_commands.json"; then
    problem="kiln added its own sanitizer flags beside OSS-Fuzz's"
  elif ! grep -A3 "build fuzz/kir-fuzzer:" "$tree/build.ninja" | grep -q -- "$engine"; then
    problem="kir-fuzzer does not link \$LIB_FUZZING_ENGINE ($engine)"
  fi
  if [[ -z $problem ]]; then
    tally 1 0 "clusterfuzzlite/build.sh's configure under OSS-Fuzz's CFLAGS and LIB_FUZZING_ENGINE: its flags alone"
  else
    tally 0 1 "clusterfuzzlite/build.sh's configure under OSS-Fuzz's flags: $problem"
    status=1
  fi
  rm -rf "$tree"
}
for name in kir repro graph; do check_output "$name"; done
check_engine_flags
kir_budget=$(( budget / 2 )) repro_budget=$(( budget / 4 ))
fuzz kir "$(( kir_budget > 0 ? kir_budget : 1 ))"
fuzz repro "$(( repro_budget > 0 ? repro_budget : 1 ))"
fuzz graph "$(( budget - kir_budget - repro_budget > 0 ? budget - kir_budget - repro_budget : 1 ))"
if ((status == 0)); then echo "fuzz.sh: no findings in ${budget}s"; else echo "fuzz.sh: findings in $findings/"; fi
exit "$status"
