#!/usr/bin/env bash
# The GPU suite (docs/cuda.md) on a machine with an NVIDIA GPU: the CUDA backend's tests (tests/test_cuda.cpp:
# every op compiled on the GPU against the fp64 interpreter, fused == unfused, the examples), then the
# inductor_cuda benchmarks beside torch.compile on the same cases (bench/peer_torch_cuda.py) when PyTorch is there.
#
#   bash ci/gpu-test.sh                 build here with cmake -j$(nproc), then run
#   bash ci/gpu-test.sh --check         only say what this machine lacks for the build (exit 1 if anything)
#   bash ci/gpu-test.sh --make-bundle F [tests|tests-no-cli|bench|all]
#                                       on a build machine: pack kiln-tests (default), kiln-bench or both, the kiln
#                                       CLI with the tests (not with tests-no-cli, when the tree leaves too little
#                                       room: the GPU CLI tests then skip), and every shared library they load (glibc's loader
#                                       included) into F (.tar.xz), for a GPU machine that cannot build kiln (the
#                                       device machine lacks LLVM 19: --check). ICU's 31 MB data library (loaded
#                                       only for libxml2's encodings inside LLVM, which kiln never uses) is
#                                       replaced by a stub defining its one symbol, so `tests` and `bench` each
#                                       fit the device run tool's 64 MiB carry limit (a warning says when not)
#   bash ci/gpu-test.sh --bundle F      on the GPU machine: unpack F and run the suite with what it holds
#
# Environment: GPU_TEST_FILTER (gtest filter; default every CUDA test), GPU_TEST_OUT (where the JSON results go;
# default ./gpu-test-out), GPU_TEST_BENCH=0 to skip the benchmarks, GPU_TEST_SHARDS (default 8),
# GPU_TEST_TIMEOUT (seconds per shard, default 1800). The suite's CLI tests run GPU_TEST_KILN (set here).
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${GPU_TEST_FILTER:-'Cuda*:Ops/Cuda*'}
out=${GPU_TEST_OUT:-$PWD/gpu-test-out}

missing_for_build() {
  local m=()
  command -v cmake >/dev/null || m+=("cmake")
  command -v ninja >/dev/null || m+=("ninja")
  [[ -d /usr/lib/llvm-19/lib/cmake/llvm ]] || m+=("llvm-19-dev (LLVM 19's CMake package, libLLVM-19)")
  [[ -e /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so ]] || m+=("libopenblas-openmp-dev")
  [[ -e /usr/include/rapidcheck.h || -e /usr/local/include/rapidcheck.h ]] || m+=("rapidcheck")
  [[ -e /usr/include/benchmark/benchmark.h || -e /usr/local/include/benchmark/benchmark.h ]] || m+=("libbenchmark-dev")
  [[ -e /usr/include/gtest/gtest.h ]] || m+=("libgtest-dev")
  [[ -e /usr/include/fmt/format.h ]] || m+=("libfmt-dev")
  [[ -d /usr/include/nlohmann ]] || m+=("nlohmann-json3-dev")
  [[ -e /usr/include/CLI/CLI.hpp ]] || m+=("libcli11-dev")
  [[ -e /usr/local/cuda/include/nvrtc.h ]] || m+=("the CUDA toolkit in /usr/local/cuda")
  printf '%s\n' "${m[@]}"
}

run_suite() {  # $1: how to run a binary of the build (a prefix), $2: tests binary, $3: bench binary, $4: the kiln CLI
  local prefix=$1 tests=$2 bench=$3 cli=${4:-}
  mkdir -p "$out"
  export KILN_CACHE_DIR
  KILN_CACHE_DIR=$(mktemp -d)
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
  local rc=0
  # The benchmarks first (a minute), so a long test run cannot crowd them out of a time-limited session.
  if [[ -n $cli && -x $cli ]]; then  # the GPU CLI tests run GPU_TEST_KILN: a wrapper through the bundle's loader
    mkdir -p "$out/bin"
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$prefix" "$cli" > "$out/bin/kiln"
    chmod +x "$out/bin/kiln"
    export GPU_TEST_KILN="$out/bin/kiln"
  fi
  if [[ ${GPU_TEST_BENCH:-1} != 0 && -x $bench ]]; then
    $prefix "$bench" --benchmark_filter='inductor_cuda/' --benchmark_format=json --benchmark_out="$out/bench.json" \
      --benchmark_out_format=json >/dev/null || rc=$?
    python3 - "$out/bench.json" <<'PY' || true
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    print(b["name"], {k: round(b[k], 3) for k in ("compiled_ms", "GB/s", "copy_GB/s", "vs_copy", "compile_ms", "kernels", "issue_us", "latency_us") if k in b}, b.get("error_message", ""))
PY
    if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
      python3 bench/peer_torch_cuda.py | tee "$out/peer_torch.jsonl" || rc=$?
    fi
  fi
  # Then the tests, in GPU_TEST_SHARDS gtest shards side by side (default 8: the host's cores compile and run the
  # fp64 reference while the GPU is shared), each with its own JSON report and log.
  [[ -x $tests ]] || { echo "gpu-test.sh: no kiln-tests here (a bench-only bundle)"; return $rc; }
  local shards=${GPU_TEST_SHARDS:-8} pids=() i
  for ((i = 0; i < shards; ++i)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "${GPU_TEST_TIMEOUT:-1800}" $prefix "$tests" --gtest_filter="$filter" \
      --gtest_output="json:$out/tests-$i.json" > "$out/tests-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || { rc=1; echo "gpu-test.sh: shard $i failed:"; grep -E '^\[  FAILED|Failure|Falsifiable' -A8 "$out/tests-$i.log" | head -60; }; done
  cat "$out"/tests-*.log | grep -E '^\[  (PASSED|FAILED|SKIPPED) ' | sort | uniq -c | sort -rn | head -40
  tar -C "$out" -cJf "$out/test-logs.tar.xz" --remove-files $(cd "$out" && ls tests-*.log tests-*.json)  # one file back
  return $rc
}

case "${1:-}" in
  --check)
    m=$(missing_for_build)
    if [[ -n $m ]]; then echo "gpu-test.sh: this machine cannot build kiln; it lacks:"; echo "$m" | sed 's/^/  - /'; exit 1; fi
    echo "gpu-test.sh: every build dependency is here"; exit 0 ;;
  --make-bundle)
    f=${2:?usage: ci/gpu-test.sh --make-bundle FILE [tests|bench|all]}
    parts=${3:-tests}
    case $parts in
      tests) bins=(build/tests/kiln-tests build/kiln) ;;
      tests-no-cli) bins=(build/tests/kiln-tests) ;;  # smaller: the GPU CLI tests then skip
      bench) bins=(build/bench/kiln-bench) ;;
      all) bins=(build/tests/kiln-tests build/kiln build/bench/kiln-bench) ;;
      *) echo "gpu-test.sh: --make-bundle FILE [tests|tests-no-cli|bench|all]: unknown part '$parts'" >&2; exit 2 ;;
    esac
    stage=$(mktemp -d)
    trap 'rm -rf "$stage"' EXIT
    mkdir "$stage/libs"
    for b in "${bins[@]}"; do
      [[ -x $b ]] || { echo "gpu-test.sh: $b not built (kiln-bench: configure with -DKILN_BUILD_BENCH=ON)" >&2; exit 2; }
      strip -o "$stage/$(basename "$b")" "$b"
      # NVRTC (110 MB) stays out: the GPU machine's toolkit provides it (--bundle adds /usr/local/cuda/lib64).
      # ICU's data library becomes a stub below.
      ldd "$b" | awk '$3 ~ /^\// && $1 !~ /^(libnvrtc|libicudata)/ {print $3}' | xargs -I{} cp -L {} "$stage/libs/"
      icu=$(ldd "$b" | awk '$1 ~ /^libicudata\.so\./ && !found {print $1; found = 1}')
      if [[ -n $icu ]]; then  # libicudata.so.72 defines only icudt72_dat, the data ICU reads at its first use
        v=${icu#libicudata.so.}
        echo "const char icudt${v%%.*}_dat[32] = {0};" > "$stage/icu_stub.c"
        cc -shared -fPIC -Wl,-soname,"$icu" -o "$stage/libs/$icu" "$stage/icu_stub.c"
        rm "$stage/icu_stub.c"
      fi
    done
    cp -L "$(ldd "${bins[0]}" | awk '/ld-linux/ {print $1}')" "$stage/libs/"
    # awk reads all of ldconfig's output (an early exit would end ldconfig with SIGPIPE: a failure under pipefail)
    mvec=$(ldconfig -p | awk '/libmvec\.so\.1 .*x86-64/ && !found {print $NF; found = 1}')
    [[ -n $mvec ]] && cp -L "$mvec" "$stage/libs/"
    cp -r examples "$stage/"
    tar -C "$stage" -cf - . | xz -${GPU_BUNDLE_XZ_LEVEL:-6} -T2 > "$f.tmp"
    mv "$f.tmp" "$f"
    size=$(stat -c %s "$f")
    echo "gpu-test.sh: wrote $f ($parts, $((size / 1048576)) MiB)"
    # The device run tool carries at most 64 MiB, the tracked files of the tree included.
    if ((size > 56 * 1048576)); then echo "gpu-test.sh: warning: $f is over 56 MiB; it may not fit the device run tool's 64 MiB carry with the tree" >&2; fi ;;
  --bundle)
    f=${2:?usage: ci/gpu-test.sh --bundle FILE}
    dir=$(mktemp -d)
    tar -C "$dir" -xJf "$f"
    export GPU_TEST_SOURCE_DIR=$dir  # the examples the tests read
    run_suite "$dir/libs/ld-linux-x86-64.so.2 --library-path $dir/libs:/usr/local/cuda/lib64" "$dir/kiln-tests" "$dir/kiln-bench" "$dir/kiln" ;;
  "")
    m=$(missing_for_build)
    if [[ -n $m ]]; then
      echo "gpu-test.sh: cannot build kiln here; missing:"; echo "$m" | sed 's/^/  - /'
      echo "build a bundle elsewhere (--make-bundle) and run it with --bundle"; exit 2
    fi
    cmake -S . -B build-gpu -G Ninja -DKILN_BUILD_BENCH=ON >/dev/null
    cmake --build build-gpu -j"$(nproc)" --target kiln-tests kiln-bench
    run_suite "" build-gpu/tests/kiln-tests build-gpu/bench/kiln-bench build-gpu/kiln ;;
  *) echo "usage: bash ci/gpu-test.sh [--check | --make-bundle FILE | --bundle FILE]" >&2; exit 2 ;;
esac
