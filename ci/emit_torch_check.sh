#!/usr/bin/env bash
# Checks the PyTorch scripts `kiln run --dump DIR --emit torch` writes, on a machine with a newer PyTorch than
# Debian's (the test suite runs them eagerly with 1.13): `prepare` dumps every example and tests/emit_torch/
# graph with kiln (inputs, kiln's outputs, the script) into OUT; `run` runs every script there with python3,
# eagerly against kiln's outputs and under torch.compile (BACKEND, default inductor), and exits 1 if any fails.
# Usage: bash ci/emit_torch_check.sh prepare OUT [KILN]     (KILN defaults to build/kiln)
#        bash ci/emit_torch_check.sh run OUT [BACKEND]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: emit_torch_check.sh prepare|run OUT}
out=${2:?usage: emit_torch_check.sh prepare|run OUT}
if [[ $mode == prepare ]]; then
  kiln=${3:-build/kiln}
  for g in examples/*.kir tests/emit_torch/*.kir; do
    name=$(basename "$g" .kir)
    "$kiln" run "$g" --seed 0 --dump "$out/$name" --emit torch >/dev/null
  done
  echo "emit_torch_check: scripts in $out"
  exit 0
fi
backend=${3:-inductor}
python3 -c 'import torch; print("PyTorch", torch.__version__)'
failed=0
for script in "$out"/*/*.py; do
  if python3 "$script" "$backend" >"$script.log" 2>&1; then
    echo "ok      $script"
  else
    echo "FAILED  $script"; sed 's/^/    /' "$script.log" | tail -8; failed=1
  fi
done
exit $failed
