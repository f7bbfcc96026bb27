#!/usr/bin/env bash
# Packs kiln-bench with every shared library it loads, the dynamic loader, and glibc's libmvec (which the JIT
# opens itself: without it sin, cos, tanh... run one scalar call a lane and chain100 takes 4x as long) into one
# .tar.xz, to time kiln on another x86-64 Linux machine that lacks its dependencies (the device machine's 16
# host cores). There:
#   tar xJf kiln-bench.tar.xz && ./libs/ld-linux-x86-64.so.2 --library-path libs:/usr/local/cuda/lib64:libs/stub ./kiln-bench --benchmark_filter='inductor/'
# Usage: bash bench/bundle.sh [BUILD_DIR] [OUT] [BINARY]   (defaults: build, BUILD_DIR/kiln-bench.tar.xz,
# bench/kiln-bench; about 50 MB). BINARY=kiln packs the kiln CLI instead (bench/real_models.py runs it there:
# `--kiln './libs/ld-linux-x86-64.so.2 --library-path libs:/usr/local/cuda/lib64:libs/stub ./kiln'`). NVRTC (105 MB)
# is left to the machine's CUDA toolkit, with an empty stand-in in libs/stub for machines without one (the CPU
# backends never call it), and ICU's 30 MB data library is replaced by an empty one (kiln never converts text).
set -euo pipefail
build=${1:-build}
out=${2:-$build/kiln-bench.tar.xz}
binary=${3:-bench/kiln-bench}
bench="$build/$binary"
name=$(basename "$binary")
[[ -x $bench ]] || { echo "bundle.sh: $bench not found: build with -DKILN_BUILD_BENCH=ON first" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/libs"
strip -o "$stage/$name" "$bench"
ldd "$bench" | awk '$3 ~ /^\// && $1 !~ /^(libnvrtc|libicudata)/ {print $3}' | xargs -I{} cp -L {} "$stage/libs/"
if ldd "$bench" | grep -q libnvrtc.so.13; then
  mkdir "$stage/libs/stub"
  echo 'int kiln_nvrtc_stub;' | gcc -x c -shared -fPIC -Wl,-soname,libnvrtc.so.13 -o "$stage/libs/stub/libnvrtc.so.13" -
fi
if ldd "$bench" | grep -q libicudata; then
  echo 'const char icudt72_dat[32] = {0};' | gcc -x c -shared -fPIC -Wl,-soname,libicudata.so.72 -o "$stage/libs/libicudata.so.72" -
fi
cp -L "$(ldd "$bench" | awk '/ld-linux/ {print $1}')" "$stage/libs/"
# awk reads all of ldconfig's output (an early exit would end ldconfig with SIGPIPE: a silent failure under pipefail)
mvec=$(ldconfig -p | awk '/libmvec\.so\.1 .*x86-64/ && !found {print $NF; found = 1}')
[[ -n $mvec ]] || { echo "bundle.sh: glibc's libmvec.so.1 not found" >&2; exit 2; }
cp -L "$mvec" "$stage/libs/"
tar -C "$stage" -cf - "$name" libs | xz -6 -T2 > "$out.tmp"
mv "$out.tmp" "$out"
echo "bundle.sh: wrote $out ($(du -h "$out" | cut -f1))"
