"""torch.compile on the CPU through kcache: a cold process fills the cache, a
fresh process with empty local cache dirs hits it, and kcached down changes
nothing but the hit counters."""

import json
import os
import subprocess
import sys
from pathlib import Path

from torch_support import require_torch

require_torch()

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def compile_in_fresh_process(tmp_path: Path, name: str, mode: str, url: str) -> dict:
    """A new trainer process whose Inductor and Triton cache dirs are empty."""
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / name / "inductor")
    env["TRITON_CACHE_DIR"] = str(tmp_path / name / "triton")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "client" / "python"), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(HERE / "torch_compile_child.py"), mode, url],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def kcache_cli(url: str, *args: str) -> subprocess.CompletedProcess:
    cli = os.environ.get("KCACHE_CLI") or str(REPO / "build" / "release" / "client" / "kcache")
    return subprocess.run([cli, "--url", url, *args], capture_output=True, text=True, timeout=60)


def test_a_fresh_process_with_empty_cache_dirs_hits_through_kcache(daemon, tmp_path):
    cold = compile_in_fresh_process(tmp_path, "cold", "train", daemon.url)
    assert cold["match"]
    assert not cold["compiler_imported_by_enable"]  # the hooks went in at the first torch.compile
    assert cold["inductor"].get("fxgraph_cache_miss", 0) >= 2  # forward and backward
    assert cold["inductor"].get("fxgraph_cache_hit", 0) == 0
    assert cold["kcache"]["fx-graph.puts"] >= 2 and cold["kcache"]["aot-autograd.puts"] == 1

    warm = compile_in_fresh_process(tmp_path, "fresh-node", "train", daemon.url)
    assert warm["match"]
    assert warm["aot_autograd"].get("autograd_cache_hit", 0) == 1
    assert warm["inductor"].get("fxgraph_cache_hit", 0) >= 2
    assert warm["inductor"].get("fxgraph_cache_miss", 0) == 0
    assert warm["kcache"].get("fx-graph.puts", 0) == 0
    assert warm["kcache"].get("errors", 0) == 0


def test_explain_names_the_inputs_that_made_two_graph_keys_differ(daemon, tmp_path):
    result = compile_in_fresh_process(tmp_path, "shapes", "infer", daemon.url)
    assert result["match"] and result["kcache"]["fx-graph.puts"] == 2
    listing = kcache_cli(daemon.url, "--json", "ls", "--prefix", "torch:ci:pt2:fx-graph-v1::")
    assert listing.returncode == 0, listing.stderr
    keys = [e["key"] for e in json.loads(listing.stdout)["entries"]]
    assert len(keys) == 2

    explained = kcache_cli(daemon.url, "--json", "explain", *keys)
    assert explained.returncode == 0, explained.stderr
    differing = {d["component"] for d in json.loads(explained.stdout)["diffs"]}
    assert any(c.startswith("example_inputs[") for c in differing), differing
    text = kcache_cli(daemon.url, "explain", *keys).stdout
    assert "torch.Size([8, 32])" in text and "torch.Size([24, 32])" in text, text


def test_with_kcached_down_torch_compile_runs_as_without_a_remote_cache(tmp_path):
    result = compile_in_fresh_process(tmp_path, "down", "train", "http://127.0.0.1:1")
    assert result["match"]
    assert result["inductor"].get("fxgraph_cache_hit", 0) == 0
    assert result["kcache"]["errors"] >= 1 and result["kcache"].get("breaker_trips", 0) >= 1
