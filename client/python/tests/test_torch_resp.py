"""PyTorch's own Redis remote FX graph cache against kcached's RESP port
(issue 21): torch.compile on the CPU with fx_graph_remote_cache and
TORCHINDUCTOR_REDIS_HOST/PORT pointing at kcached, no kcache code in the
trainer. A cold process fills the cache over SET; a fresh process with empty
local cache dirs hits it over GET."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import _kcached
from torch_support import require_torch

require_torch()
pytest.importorskip("redis")  # PyTorch's Redis backend uses redis-py (scripts/setup installs it)

CHILD = r"""
import json, sys
import torch
import torch._inductor.config as config
from torch._dynamo.utils import counters

config.fx_graph_cache = True
config.fx_graph_remote_cache = True
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 32)
with torch.no_grad():
    match = torch.allclose(torch.compile(model)(x), model(x), atol=1e-5)
print(json.dumps({"match": bool(match),
                  "inductor": {k: v for k, v in counters["inductor"].items() if "cache" in k}}))
"""


@pytest.fixture
def resp_kcached(tmp_path):
    log_path = tmp_path / "kcached.log"
    port_file = tmp_path / "port"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [_kcached(), "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data"),
             "--port-file", str(port_file), "--resp-listen", "127.0.0.1:0", "--workers", "0",
             "--threads", "2", "--log-level", "info"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists():
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.02)
        found = re.search(r"RESP listening on \S+ \(port (\d+)\)", log_path.read_text())
        assert found, log_path.read_text()
        yield int(found.group(1))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def compile_in_fresh_process(tmp_path: Path, name: str, port: int) -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / name / "inductor")
    env["TRITON_CACHE_DIR"] = str(tmp_path / name / "triton")
    env["TORCHINDUCTOR_REDIS_HOST"] = "127.0.0.1"
    env["TORCHINDUCTOR_REDIS_PORT"] = str(port)
    env.pop("KCACHE_TORCH", None)  # no kcache code: PyTorch's own Redis backend only
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_fresh_process_hits_pytorchs_redis_remote_cache_on_kcached(resp_kcached, tmp_path):
    cold = compile_in_fresh_process(tmp_path, "cold", resp_kcached)
    assert cold["match"]
    assert cold["inductor"].get("fxgraph_cache_miss", 0) >= 1
    assert cold["inductor"].get("fxgraph_cache_hit", 0) == 0

    warm = compile_in_fresh_process(tmp_path, "fresh-node", resp_kcached)
    assert warm["match"]
    assert warm["inductor"].get("fxgraph_cache_hit", 0) >= 1
    assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
