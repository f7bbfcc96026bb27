#!/usr/bin/env bash
# Writes the code kiln's CPU inductor generates (KILN_LOGS=output_code: each kernel's loop IR and LLVM IR) for
# every graph under examples/ and tests/inductor_safety/ (forward, and forward and backward) and every repro
# under tests/repros/, one file each, so that a restructure
# can show its generated code byte-identical before and after:
#   bash ci/codegen_snapshot.sh build /tmp/before   (on the old tree)
#   bash ci/codegen_snapshot.sh build /tmp/after    (on the new one)
#   diff -r /tmp/before /tmp/after
# A graph the inductor refuses is recorded with its error (a refusal that changes is a difference too).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: codegen_snapshot.sh BUILD_DIR OUT_DIR}
out=${2:?usage: codegen_snapshot.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
for g in examples/*.kir tests/inductor_safety/*.kir; do
  [[ -f $g ]] || continue
  name=$(tr '/' '_' <<<"$g")
  KILN_LOGS=output_code KILN_CACHE_DIR="$cache" "$build/kiln" run --backend inductor --seed 0 "$g" \
    > "$out/$name.txt" 2>&1 || true
  KILN_LOGS=output_code KILN_CACHE_DIR="$cache" "$build/kiln" run --backend inductor --seed 0 --check --grad "$g" \
    > "$out/$name.grad.txt" 2>&1 || true
done
for r in tests/repros/*.repro; do
  [[ -f $r ]] || continue
  KILN_LOGS=output_code KILN_CACHE_DIR="$cache" "$build/kiln" repro run "$r" > "$out/$(tr '/' '_' <<<"$r").txt" 2>&1 || true
done
# A kernel's symbol (kiln_k_<hash>) hashes the build's identity too, so every rebuild renames every kernel: the
# names are numbered in order of appearance instead, and the code is compared.
for f in "$out"/*; do
  awk '{ while (match($0, /kiln_k_[0-9a-f]+/)) { k = substr($0, RSTART, RLENGTH); if (!(k in n)) n[k] = "kiln_k_" length(n);
         printf "%s%s", substr($0, 1, RSTART - 1), n[k]; $0 = substr($0, RSTART + RLENGTH) } print }' "$f" > "$f.tmp" &&
    mv "$f.tmp" "$f"
done
echo "codegen_snapshot: $(ls "$out" | wc -l) graphs in $out"
