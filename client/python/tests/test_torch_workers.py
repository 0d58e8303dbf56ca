"""Inductor's compile workers use kcache too (their autotune caches are made there)."""

import os
from pathlib import Path

from torch_support import require_torch

require_torch()

import kcache.torch  # noqa: E402
from torch._inductor.compile_worker.subproc_pool import SubprocPool  # noqa: E402

HERE = Path(__file__).resolve().parent


def test_compile_workers_started_after_enable_get_kcache_backends(daemon, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    kcache.torch.enable(url=daemon.url, namespace="workers")
    try:
        pool = SubprocPool(2)
        try:
            import compile_worker_probe

            assert pool.submit(compile_worker_probe.remote_autotune_backend_url).result(timeout=120) == daemon.url
        finally:
            pool.shutdown()
    finally:
        kcache.torch.disable()
    assert "KCACHE_URL" not in os.environ or os.environ["KCACHE_URL"] != daemon.url
