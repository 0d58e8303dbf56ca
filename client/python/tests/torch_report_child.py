"""One trainer process for test_torch_report: a cache miss, a recompile (a
new shape without dynamic=True) and a graph break, then its run report.

    python torch_report_child.py URL RUN_ID
"""

import json
import os
import sys
import time

import torch

import kcache.torch

url, run = sys.argv[1], sys.argv[2]
os.environ["KCACHE_RUN_ID"] = run
kcache.torch.enable(url=url, namespace="ci", timeout_ms=2000)


def f(x):
    y = torch.sin(x) * 2
    print("a graph break")  # Dynamo cannot trace print: it breaks the graph here
    return torch.cos(y) + 1


compiled = torch.compile(f, dynamic=False)
for shape in ((4, 8), (4, 8), (6, 8)):  # the third shape fails a guard: a recompile
    x = torch.randn(*shape)
    started = time.perf_counter()
    f(x)
    kcache.torch.report_step(time.perf_counter() - started, eager=True)
    started = time.perf_counter()
    assert torch.allclose(compiled(x), f(x), atol=1e-5)
    kcache.torch.report_step(time.perf_counter() - started)
kcache.torch.disable()  # puts the report
print(json.dumps({"done": True}))
