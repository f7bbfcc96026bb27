#!/usr/bin/env bash
# Packs kiln-bench with every shared library it loads, the dynamic loader, and glibc's libmvec (which the JIT
# opens itself: without it sin, cos, tanh... run one scalar call a lane and chain100 takes 4x as long) into one
# .tar.xz, to time kiln on another x86-64 Linux machine that lacks its dependencies (the device machine's 16
# host cores). There:
#   tar xJf kiln-bench.tar.xz && ./libs/ld-linux-x86-64.so.2 --library-path libs ./kiln-bench --benchmark_filter='inductor/'
# Usage: bash bench/bundle.sh [BUILD_DIR] [OUT]   (defaults: build, BUILD_DIR/kiln-bench.tar.xz; about 50 MB)
set -euo pipefail
build=${1:-build}
out=${2:-$build/kiln-bench.tar.xz}
bench="$build/bench/kiln-bench"
[[ -x $bench ]] || { echo "bundle.sh: $bench not found: build with -DKILN_BUILD_BENCH=ON first" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/libs"
strip -o "$stage/kiln-bench" "$bench"
ldd "$bench" | awk '$3 ~ /^\// {print $3}' | xargs -I{} cp -L {} "$stage/libs/"
cp -L "$(ldd "$bench" | awk '/ld-linux/ {print $1}')" "$stage/libs/"
mvec=$(ldconfig -p | awk '/libmvec\.so\.1 .*x86-64/ {print $NF; exit}')
[[ -n $mvec ]] || { echo "bundle.sh: glibc's libmvec.so.1 not found" >&2; exit 2; }
cp -L "$mvec" "$stage/libs/"
tar -C "$stage" -cf - kiln-bench libs | xz -6 -T0 > "$out.tmp"
mv "$out.tmp" "$out"
echo "bundle.sh: wrote $out ($(du -h "$out" | cut -f1))"
