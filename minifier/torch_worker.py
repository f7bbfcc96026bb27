# The PyTorch worker of `kiln minify --oracle torch` (minifier/torch_oracle.h): one Python process per -j slot,
# started once and fed candidates, so PyTorch is imported once, not once per candidate. kiln embeds this file
# and runs it as `python3 -c <this file> BACKEND`; it never loads it from disk.
#
# Protocol: stdin carries one JSON string per line, a candidate directory holding candidate.py (the graph as
# `kiln minify --emit torch` writes it) and the candidate's inputs. For each, the worker imports that script as
# a fresh module, calls its judge(backend) and writes the result as one JSON line to file descriptor 3:
#   {"kind": "none" | "compile_error" | "runtime_error" | "accuracy" | "eager_error", "message": ..., "detail": ...}
# Before the first candidate it writes {"ready": PyTorch's version}; a backend it cannot load ends it with
# {"error": why}. A crash or a hang is seen by kiln (the process dies or stops answering) and kiln restarts it.
# stdout and stderr (PyTorch's and the backend's prints) go to a log file kiln names.
import importlib.util
import json
import os
import sys

import numpy  # noqa: F401  (imported once here: each candidate's import of it is then free)
import torch

results = os.fdopen(3, "w")
backend_spec = sys.argv[1]
backend = None


def answer(obj):
    results.write(json.dumps(obj) + "\n")
    results.flush()


answer({"ready": torch.__version__})
for count, line in enumerate(sys.stdin):
    directory = json.loads(line)
    module_spec = importlib.util.spec_from_file_location(f"kiln_candidate_{count}",
                                                         os.path.join(directory, "candidate.py"))
    candidate = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(candidate)
    if backend is None:
        try:
            backend = candidate.load_backend(backend_spec)
        except (SystemExit, Exception) as e:
            answer({"error": str(e)})
            sys.exit(2)
        if isinstance(backend, str) and not hasattr(torch, "compile"):
            answer({"error": f"PyTorch {torch.__version__} has no torch.compile: name the backend as "
                             "FILE.py:FUNCTION (a function of a torch.fx.GraphModule and its example inputs)"})
            sys.exit(2)
    answer(candidate.judge(backend))
    sys.modules.pop(module_spec.name, None)
