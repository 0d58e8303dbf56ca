"""kcache stats (hit ratio, sizes and capacity per tier, version, --zero) and
kcache gc --older-than against a real kcached (issue 17 part 5)."""

import json
import os
import subprocess

import kcache
from conftest import REPO


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    binary = os.environ.get("KCACHE_CLI") or str(REPO / "build" / "release" / "client" / "kcache")
    return subprocess.run([binary, "--url", url, *args], capture_output=True, text=True, timeout=60)


def test_stats_show_ratio_sizes_version_and_zero(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    assert c.put("torch:team:pt2:fx-graph-v1::k:c1", b"x" * 1000)
    assert c.get("torch:team:pt2:fx-graph-v1::k:c1") is not None
    assert c.get("torch:team:pt2:fx-graph-v1::missing:c1") is None
    doc = json.loads(cli(daemon.url, "stats", "--json").stdout)
    assert 0 < doc["hit_ratio"] < 1 and doc["version"]
    tiers = {t["name"]: t for t in doc["tiers"]}
    assert tiers["memory"]["capacity"] > 0 and tiers["memory"]["bytes_stored"] >= 1000
    # RocksDB counts its entries (the record and its blob), as memory does.
    assert tiers["rocksdb"]["capacity"] > 0 and tiers["rocksdb"]["entries"] == tiers["memory"]["entries"] == 2
    table = cli(daemon.url, "stats")
    assert table.returncode == 0 and "hit ratio" in table.stdout and "CAPACITY" in table.stdout
    zeroed = cli(daemon.url, "stats", "--zero", "--json")
    assert zeroed.returncode == 0, zeroed.stderr
    after = json.loads(zeroed.stdout)
    assert after["hits"] == 0 and after["misses"] == 0 and after["hit_ratio"] is None
    assert after["zeroed_ms"] > 0


def test_gc_older_than(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    assert c.put("k", b"value")
    kept = cli(daemon.url, "gc", "--older-than", "1h", "--json")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["removed_entries"] == 0
    assert c.get("k") == b"value"
    assert cli(daemon.url, "gc", "--older-than", "7w").returncode == 2  # unknown unit
    assert cli(daemon.url, "gc").returncode == 2  # neither bound
