"""Another rank for test_torch_async: kcache.torch.compile(async_compile=True)
on a small model, steps until the wrapper switched (or a deadline), and the
outcome as JSON on the last line.

    python torch_async_child.py train|infer|fail URL mlp|linear [NAMESPACE]
"""

import json
import logging
import sys
import time

import torch

import kcache.torch

import torch_async_models

mode, url = sys.argv[1], sys.argv[2]
namespace = sys.argv[4] if len(sys.argv) > 4 else "ci"
build = getattr(torch_async_models, sys.argv[3])
after = 3  # compiled steps after the switch
warnings = []


class Collect(logging.Handler):
    def emit(self, record):
        if record.levelno >= logging.WARNING:
            warnings.append(record.getMessage())


logging.getLogger("kcache").addHandler(Collect())
kcache.torch.enable(url=url, namespace=namespace, timeout_ms=2000, report=False, prefetch=False)
assert "torch._dynamo" not in sys.modules  # enable() left its hooks for the first torch.compile
# A trainer that sets an Inductor option in code imports Inductor's config
# before any compile: the child gets that config and must still put its
# entries in kcache (the config's remote-cache switches are kcache's).
import torch._inductor.config as inductor_config  # noqa: E402

inductor_config.fx_graph_cache = True

model = build()
factory = torch_async_models.broken if mode == "fail" else None
kwargs = {"dynamic": False} if mode == "train" else {"mode": "default"}  # as the test's rank 0
wrapped = kcache.torch.compile(model, async_compile=True, factory=factory, **kwargs)
reference = build()  # same seed, same weights: the eager twin
opt = torch.optim.SGD(model.parameters(), lr=0.05)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.05)
torch.manual_seed(1)
states, match, steps = [], True, 0
deadline = time.monotonic() + 240
while time.monotonic() < deadline:
    x = torch.randn(16, 32)
    if mode == "infer":
        with torch.no_grad():
            out = wrapped(x)
            match &= torch.allclose(out, reference(x), atol=1e-5)
    else:
        for m, o in ((wrapped, opt), (reference, ref_opt)):
            o.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            o.step()
        match &= all(torch.allclose(p, q, atol=1e-4) for p, q in zip(model.parameters(), reference.parameters()))
    states.append(wrapped.state)
    steps += 1
    if wrapped.state == "compiled" and steps - wrapped.switched_at_call >= after:
        break
    if states.count("failed") >= 5:
        break
    time.sleep(0.1)
print(
    json.dumps(
        {
            "states": states,
            "match": bool(match),
            "switched_at": wrapped.switched_at_call,
            "switch_s": wrapped.switch_seconds,
            "child_s": wrapped.child_seconds,
            "steps": steps,
            "warm_load_misses": wrapped.warm_load_misses,
            "compiled_by": wrapped.compiled_by,
            "failure": wrapped.failure,
            "warnings": [w for w in warnings if "async compile" in w],
            "frames": sys.modules["torch._dynamo.utils"].counters["frames"].get("ok", 0),
            "kcache": kcache.torch.stats(),
            "same_params": all(a is b for a, b in zip(opt.param_groups[0]["params"], model.parameters())),
        }
    )
)
