#!/bin/bash -eu
# Builds kiln's fuzz targets the way OSS-Fuzz and ClusterFuzzLite expect (their `compile` step runs this script
# in the source directory, with CC, CXX, CFLAGS, CXXFLAGS, LIB_FUZZING_ENGINE, SANITIZER, WORK and OUT set), and
# the way ci/fuzz.sh builds the fuzzers it runs (the same script, on CI's sanitized tree). It leaves in $OUT:
#   kir-fuzzer, repro-fuzzer, graph-fuzzer       the targets (fuzz/*.cpp), linked against $LIB_FUZZING_ENGINE
#   <target>_seed_corpus.zip                      the checked-in seeds, fuzz/corpus/<kir|repro|graph>/
#   <target>.dict                                 the dictionary, where fuzz/ has one
#   lib/                                          every shared library the targets load that a runner may lack
#                                                 (the runner image has only the C library); the targets find
#                                                 them through their RPATH, $ORIGIN/lib (fuzz/CMakeLists.txt)
# The source is the current directory. The build tree is $WORK/kiln-build, or KILN_SANITIZE_BUILD_DIR (ci/fuzz.sh
# passes build-asan, the tree ci/test.sh --sanitize built, so CI compiles the sanitized library once).
# The configure line is ci/build.sh --sanitize's: this script passes it OSS-Fuzz's compiler, flags and engine.
set -o pipefail
die() { echo "clusterfuzzlite/build.sh: $*" >&2; exit 2; }

[[ -f CMakeLists.txt && -f ci/build.sh && -d fuzz/corpus ]] ||
  die "run it in kiln's source directory (the Dockerfile's WORKDIR, \$SRC/kiln); $PWD is not one"
[[ -n ${OUT:-} ]] || die "OUT is not set: name the directory the targets go to (OSS-Fuzz sets it)"
mkdir -p "$OUT/lib"
OUT=$(cd "$OUT" && pwd)
if [[ -z ${KILN_SANITIZE_BUILD_DIR:-} ]]; then
  [[ -n ${WORK:-} ]] || die "neither WORK nor KILN_SANITIZE_BUILD_DIR is set: name a directory for the build tree"
  export KILN_SANITIZE_BUILD_DIR=$WORK/kiln-build
fi
# OSS-Fuzz's CC and CXX are its own clang; outside it, ci/build.sh's default (clang-19).
[[ -n ${CC:-} ]] && export KILN_SANITIZE_CC=$CC
[[ -n ${CXX:-} ]] && export KILN_SANITIZE_CXX=$CXX

targets=(kir-fuzzer repro-fuzzer graph-fuzzer)
bash ci/build.sh --sanitize "${targets[@]}"

for target in "${targets[@]}"; do
  built=$KILN_SANITIZE_BUILD_DIR/fuzz/$target
  cp -f "$built" "$OUT/$target"
  name=${target%-fuzzer}
  # Seeds, zipped with their names at the top level (OSS-Fuzz unpacks <target>_seed_corpus.zip as the corpus).
  rm -f "$OUT/${target}_seed_corpus.zip"
  (cd "fuzz/corpus/$name" && cmake -E tar cf "$OUT/${target}_seed_corpus.zip" --format=zip -- *)
  if [[ -f fuzz/$name.dict ]]; then cp -f "fuzz/$name.dict" "$OUT/$target.dict"; fi
  # The libraries it loads, but not the C library's own (the runner has those, and a copied libc would not match
  # the runner's loader).
  # Each is copied under the name the target asks for (its soname), which is what the loader looks up.
  ldd "$built" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r soname library; do
    case $soname in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|ld-linux*) ;;
      *) cp -fL "$library" "$OUT/lib/$soname" ;;
    esac
  done
done
echo "clusterfuzzlite/build.sh: ${targets[*]} in $OUT (their libraries in $OUT/lib)"
