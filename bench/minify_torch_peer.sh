#!/usr/bin/env bash
# `kiln minify --oracle torch` on a machine with PyTorch 2.x (torch.compile's Dynamo path, real inductor), and
# PyTorch's own minifier (repro_after="aot", level 4) on the same planted bug beside it: the figures of
# docs/minifier.md "External oracles on PyTorch 2.x". Run from the repository root with the kiln CLI bundled by
# `bash bench/bundle.sh build BUNDLE.tar.xz kiln` (kiln needs none of its libraries installed there):
#   bash bench/minify_torch_peer.sh BUNDLE.tar.xz [--with-pytorch-minifier]
# PyTorch's minifier is given 330 s (it did not finish on the 100-node chain in that time).
set -u
bundle=$(realpath "${1:?usage: bash bench/minify_torch_peer.sh BUNDLE.tar.xz [--with-pytorch-minifier]}")
with_peer=${2:-}
SRC=$PWD
D=$(mktemp -d); cd "$D"
tar xJf "$bundle"
mv kiln kiln.bin
cat > kiln <<K
#!/bin/sh
exec $D/libs/ld-linux-x86-64.so.2 --library-path $D/libs:/usr/local/cuda/lib64:$D/libs/stub $D/kiln.bin "\$@"
K
chmod +x kiln
python3 -c "import torch; print('torch', torch.__version__)"
python3 - <<'P'
lines = ["graph chain(%x: f32[64, 64]) {"]
prev = "%x"
for i in range(100):
    op = "relu(%s)" % prev if i == 50 else ("mul(%s, 0.99)" % prev if i % 2 else "add(%s, 0.01)" % prev)
    lines.append(f"  %n{i} = {op}")
    prev = f"%n{i}"
lines.append(f"  return {prev}\n}}")
open("g100.kir", "w").write("\n".join(lines) + "\n")
P
B=$SRC/tests/torch_backends/standins.py
for fn in wrong_relu; do
  echo "=== kiln --oracle torch, $fn, 100 nodes (torch.compile + Dynamo)"
  /usr/bin/time -f "wall %e s" ./kiln minify -q g100.kir --oracle torch --torch-backend "$B:$fn" -o out_$fn 2>&1 | head -12
  (cd out_$fn && python3 candidate.py "$B:$fn" | tail -3; echo "script exit ${PIPESTATUS[0]}")
done
echo "=== kiln --oracle torch -j 4, wrong_relu"
/usr/bin/time -f "wall %e s" ./kiln minify -q g100.kir --oracle torch -j 4 --torch-backend "$B:wrong_relu" -o out_j4 2>&1 | grep -E "failure|minified|workers|wall"
printf 'graph s(%%x: f32[8, 8]) {\n  %%a = sigmoid(%%x)\n  %%b = tanh(%%a)\n  %%c = relu(%%b)\n  return %%c\n}\n' > s.kir
for fn in reject_sigmoid abort_on_tanh; do
  echo "=== kiln --oracle torch, $fn"
  ./kiln minify -q s.kir --oracle torch --torch-backend "$B:$fn" -o out_$fn 2>&1 | grep -E "failure|minified|workers|error" | head -5
done
echo "=== inductor, a correct compile: nothing to minify (exit 2)"
/usr/bin/time -f "wall %e s" ./kiln minify -q g100.kir --oracle torch --torch-backend inductor -o out_ind 2>&1 | tail -4
echo "=== real inductor with PyTorch's own planted bug (cpp.inject_relu_bug_TESTING_ONLY=accuracy): kiln --oracle torch"
cat > relubug.py <<'P'
import torch
def inductor_relu_bug(gm, inputs):
    import torch._inductor.config as config
    config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    from torch._inductor.compile_fx import compile_fx
    return compile_fx(gm, inputs)
P
/usr/bin/time -f "wall %e s" timeout 240 ./kiln minify -q g100.kir --oracle torch --torch-backend "$D/relubug.py:inductor_relu_bug" -o out_relubug 2>&1 | tail -8
/usr/bin/time -f "wall %e s" timeout 240 ./kiln minify -q g100.kir --oracle torch -j 4 --torch-backend "$D/relubug.py:inductor_relu_bug" -o out_relubug4 2>&1 | grep -E "minified|workers|wall|candidates"
(cd out_relubug && ls && grep -c "torch\.\|aten" candidate.py; timeout 120 python3 candidate.py "$D/relubug.py:inductor_relu_bug" 2>&1 | tail -3; echo "script exit ${PIPESTATUS[0]}")
[ "$with_peer" = --with-pytorch-minifier ] || exit 0
echo "=== PyTorch's own minifier (repro_after=aot, level 4) on the same 100-node chain and bug"
mkdir tm && cd tm
cat > model.py <<'P'
import torch, torch._dynamo.config, torch._inductor.config
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch._dynamo.config.repro_after = "aot"
torch._dynamo.config.repro_level = 4
def f(x):
    for i in range(100):
        x = torch.relu(x) if i == 50 else (x * 0.99 if i % 2 else x + 0.01)
    return x
try:
    torch.compile(f)(torch.randn(64, 64))
    print("no failure seen")
except Exception as e:
    print("failed:", type(e).__name__, str(e)[:200])
P
/usr/bin/time -f "wall %e s (capture + failing compile)" python3 model.py 2>&1 | tail -4
L=$(find . -name minifier_launcher.py | head -1); echo "launcher: $L"
if [ -n "$L" ]; then
  (cd "$(dirname "$L")" && /usr/bin/time -f "wall %e s (PyTorch minifier)" timeout 330 python3 minifier_launcher.py > ../minify.log 2>&1; echo "exit $?"; tail -5 ../minify.log)
  R=$(find . -name repro.py | head -1); echo "repro: $R"; [ -n "$R" ] && grep -cE "torch.ops.aten" "$R"
fi
