# Stand-in torch.compile backends for the tests of `kiln minify --oracle torch` (tests/test_minify_torch.cpp):
# planted compiler bugs, one per failure kind, so the tests run on Debian's PyTorch 1.13 (which has no
# torch.compile: the worker hands these functions the module as torch.fx traces it) as well as on PyTorch 2.x
# (torch.compile(backend=...) hands them Dynamo's graph). Each takes a torch.fx.GraphModule and example inputs and
# returns a callable, as every torch.compile backend does.
import os

import torch


def _calls(gm, name):
    """The graph's calls of ATen's `name` (the op packet, as the emitted script calls it, or its default overload)."""
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and str(n.target) in (f"aten.{name}", f"aten.{name}.default")]


def honest(gm, example_inputs):
    """Compiles nothing wrong: the graph as it was given."""
    return gm.forward


def wrong_relu(gm, example_inputs):
    """A wrong lowering: relu computed as its negation (an accuracy failure wherever an input is positive)."""
    for n in _calls(gm, "relu"):
        n.target = torch.ops.aten.neg
    gm.recompile()
    return gm.forward


def abort_on_tanh(gm, example_inputs):
    """A compiler that crashes the process (SIGABRT) on any graph with a tanh."""
    if _calls(gm, "tanh"):
        os.abort()
    return gm.forward


def reject_sigmoid(gm, example_inputs):
    """A compile error on any graph with a sigmoid."""
    if _calls(gm, "sigmoid"):
        raise NotImplementedError("stand-in backend: no lowering for sigmoid")
    return gm.forward
