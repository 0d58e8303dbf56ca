"""One fresh trainer process for test_torch_compile: torch.compile a small
model through kcache and print what happened as JSON on the last line.

    python torch_compile_child.py train|infer URL
"""

import json
import sys

import torch

import kcache.torch

mode, url = sys.argv[1], sys.argv[2]
kcache.torch.enable(url=url, namespace="ci", timeout_ms=500)
# enable() leaves Dynamo and Inductor unimported: its hooks go in at the
# first torch.compile below, which must still hit.
result = {"compiler_imported_by_enable": "torch._dynamo" in sys.modules or "torch._inductor" in sys.modules}

torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8)
)
if mode == "train":
    x = torch.randn(16, 32)
    compiled = torch.compile(model)
    compiled(x).square().mean().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).square().mean().backward()
    result["match"] = all(torch.allclose(g, p.grad, atol=1e-5) for g, p in zip(grads, model.parameters()))
else:  # two static shapes: two FX graphs whose keys differ by their inputs
    compiled = torch.compile(model, dynamic=False)
    with torch.no_grad():
        result["match"] = all(
            torch.allclose(compiled(x), model(x), atol=1e-5) for x in (torch.randn(8, 32), torch.randn(24, 32))
        )
from torch._dynamo.utils import counters  # noqa: E402 - imported by the compile above

result["inductor"] = {k: v for k, v in counters["inductor"].items() if "cache" in k}
result["aot_autograd"] = {k: v for k, v in counters["aot_autograd"].items() if "cache" in k}
result["kcache"] = kcache.torch.stats()
print(json.dumps(result))
