#!/usr/bin/env bash
# Installs dependencies, builds, and runs kiln's main job on the bundled examples: the eager demo, a graph
# compiled by the inductor and checked against the fp64 reference, then a compiler bug (injected into the
# relu lowering) shrunk by the minifier to a one-node repro file that `kiln repro run` confirms.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
bash ci/build.sh build
build/kiln demo
echo
echo "== kiln::compile a C++ model forward: explain(), a recompile and its reason, the speedup over eager"
build/kiln-capture-demo
echo
echo "== compile examples/conv_block.kir with the inductor and check it against the fp64 reference"
build/kiln run examples/conv_block.kir --backend inductor --seed 0 --check
echo
echo "== inject a compile error into the relu lowering and minify the failing graph to a repro"
out=$(mktemp -d)
KILN_INJECT=relu:compile_error build/kiln minify examples/conv_block.kir --backend inductor -o "$out/conv_block.repro"
echo
echo "== the repro file, and kiln repro run (exit 1: it still reproduces)"
cat "$out/conv_block.repro"
status=0
build/kiln repro run "$out/conv_block.repro" || status=$?
[[ $status == 1 ]] || { echo "demo: expected the repro to reproduce (exit 1), got $status" >&2; exit 1; }
