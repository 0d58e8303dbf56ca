"""The run manifest and its prefetch against a real kcached: a fresh process
reads the entries its run used before in one batch and answers its lookups
from memory; with kcached down the prefetch fails open, counted."""

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from torch_support import require_torch

require_torch()

from kcache.torch import Settings  # noqa: E402
from kcache.torch._session import Session  # noqa: E402
from kcache.torch.inductor_backend import KcacheInductorBackend  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def inductor_value(payload: bytes) -> bytes:
    return json.dumps({"data": base64.b64encode(payload).decode("ascii"), "time_taken_ms": 7}).encode()


def session(url: str) -> tuple[Session, KcacheInductorBackend]:
    s = Session(Settings(url=url, namespace="test", timeout_ms=500))
    s.start_prefetch()
    # Autotune entries: served from memory (FX graphs would go to Inductor's local dir).
    return s, KcacheInductorBackend(s, "autotune", False)


def test_a_new_session_answers_its_run_s_lookups_from_one_batch(daemon, monkeypatch, tmp_path):
    monkeypatch.setenv("KCACHE_RUN_ID", "prefetch-unit")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    keys = [f"pt2:autotune-best-config-v2::k{i:04x}:c1" for i in range(20)]
    first, be = session(daemon.url)
    for i, key in enumerate(keys):
        be.put(key, inductor_value(bytes([i]) * 1000))
    first.close()  # writes the manifest
    assert first.stats["prefetch_manifest_misses"] == 1 and first.stats["prefetch_manifest_puts"] == 1

    second, be = session(daemon.url)
    for i, key in enumerate(keys):
        assert json.loads(be.get(key)) == json.loads(inductor_value(bytes([i]) * 1000))
    assert second.stats["prefetch_hits"] == 20 and second.stats["autotune.hits"] == 20
    assert second.stats["requests.get_entry"] == 1  # the manifest
    assert second.stats["requests.batch_get"] == 1
    assert be.get("pt2:autotune-best-config-v2::knot-listed:c1") is None  # not listed: asks kcached
    assert second.stats["requests.get_entry"] == 2
    second.close()
    assert second.stats["prefetch_manifest_puts"] == 0  # nothing new: the manifest stays


def test_with_prefetch_off_every_lookup_is_a_round_trip(daemon, monkeypatch):
    monkeypatch.setenv("KCACHE_RUN_ID", "prefetch-off")
    s = Session(Settings(url=daemon.url, namespace="test", prefetch=False))
    s.start_prefetch()
    be = KcacheInductorBackend(s, "fx-graph", False)
    be.put("pt2:fx-graph-v1::fone:c1", inductor_value(b"x"))
    assert be.get("pt2:fx-graph-v1::fone:c1") is not None
    s.close()
    assert s.prefetch is None and s.stats["requests.get_entry"] == 1 and s.stats["requests.put"] == 1


def run_child(tmp_path: Path, name: str, url: str) -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / name / "inductor")
    env["TRITON_CACHE_DIR"] = str(tmp_path / name / "triton")
    env["KCACHE_RUN_ID"] = "prefetch-child"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "client" / "python"), env.get("PYTHONPATH")]))
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(HERE / "torch_compile_child.py"), "train", url],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.monotonic() - started
    return result


def test_a_fresh_process_serves_its_lookups_from_the_prefetched_set(daemon, tmp_path):
    cold = run_child(tmp_path, "cold", daemon.url)
    assert cold["match"] and cold["kcache"]["fx-graph.puts"] >= 2
    assert cold["kcache"]["prefetch_manifest_misses"] == 1

    fresh = run_child(tmp_path, "fresh-node", daemon.url)
    stats = fresh["kcache"]
    assert fresh["match"]
    graphs = fresh["inductor"].get("fxgraph_cache_hit", 0)
    assert graphs >= 2 and fresh["inductor"].get("fxgraph_cache_miss", 0) == 0
    assert fresh["aot_autograd"].get("autograd_cache_hit", 0) == 1
    # Every FX graph and the AOTAutograd entry came in the one batch and were
    # written where Inductor looks first: it never asked kcached for them. The
    # only single gets left are the manifest and entries nobody ever wrote.
    assert stats["requests.batch_get"] == 1 and stats["prefetch_local_writes"] == graphs + 1
    assert stats.get("fx-graph.hits", 0) == 0 and stats.get("aot-autograd.hits", 0) == 0
    misses = sum(v for k, v in stats.items() if k.endswith(".misses"))
    assert stats["requests.get_entry"] == 1 + misses, stats
    assert stats.get("errors", 0) == 0


def test_with_kcached_down_the_prefetch_fails_open_counted_and_blocks_nothing(tmp_path):
    down = run_child(tmp_path, "down", "http://127.0.0.1:1")
    stats = down["kcache"]
    assert down["match"]
    assert stats["prefetch_errors"] == 1 and stats.get("prefetch_hits", 0) == 0
    assert stats.get("prefetch_wait_timeouts", 0) == 0
