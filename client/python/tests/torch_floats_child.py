"""A child process for test_torch_float_specializations: a module whose
Python floats Dynamo traces as symbols with dynamic=True, two of which
AOTAutograd's tensorify pass cannot keep (a restart in plain PyTorch 2.11).

    python torch_floats_child.py SCALE [SCALE ...]

With FLOATS_GRAPH_BREAK=1 the forward breaks its graph in the middle
(Dynamo then restarts for the break too, and compiles a resume function).

Prints one JSON line at exit (after kcache wrote its record): Dynamo's
attempts per frame compile, kcache's float counters, and whether each call
matched eager."""

import atexit
import json
import math
import os
import sys

import torch

import kcache.torch

result: dict = {}


def report() -> None:  # registered first: runs after kcache's own exit handlers (its record written)
    result["kcache"] = {k: v for k, v in live.items() if k.startswith("float_specializations")}
    print(json.dumps(result), flush=True)


atexit.register(report)
kcache.torch.enable()
live = kcache.torch._session.stats  # the session's own counters, still counting at exit


GRAPH_BREAK = os.environ.get("FLOATS_GRAPH_BREAK") == "1"


class Gelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 8)
        self.eps = 1e-5

    def forward(self, x, scale: float):
        y = self.lin(x)
        y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3.0))))
        if GRAPH_BREAK:
            torch._dynamo.graph_break()
        y = torch.nn.functional.layer_norm(y, y.shape[-1:], eps=self.eps)
        return y * scale


module = Gelu()
compiled = torch.compile(module, dynamic=True, backend="aot_eager")
x = torch.randn(4, 8)
matches = []
for scale in map(float, sys.argv[1:]):
    matches.append(bool(torch.allclose(compiled(x, scale), module(x, scale), atol=1e-6)))
metrics = torch._dynamo.utils.compilation_time_metrics
result["attempts"] = {k: len(v) for k, v in metrics.items() if k.startswith("compile_attempt")}
result["frames"] = len(metrics.get("_compile.compile_inner", []))
result["matches"] = matches
