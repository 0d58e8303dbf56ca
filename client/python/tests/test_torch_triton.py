"""kcache.torch's Triton cache manager against a real kcached (no GPU needed:
the manager only moves files)."""

from pathlib import Path

from torch_support import require_torch

require_torch()

from triton.runtime.cache import FileCacheManager  # noqa: E402

from kcache.torch.triton_backend import KcacheCacheManager  # noqa: E402


def node(monkeypatch, daemon, tmp_path: Path, name: str) -> None:
    monkeypatch.setenv("KCACHE_URL", daemon.url)
    monkeypatch.setenv("KCACHE_NAMESPACE", "t")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / name))
    monkeypatch.setenv("TRITON_REMOTE_CACHE_BACKEND", "kcache.torch.triton_backend:KcacheTritonBackend")


def test_a_kernel_group_reaches_a_fresh_node_and_both_dirs_stay_readable(monkeypatch, daemon, tmp_path):
    node(monkeypatch, daemon, tmp_path, "node1")
    producer = KcacheCacheManager("KERNELKEY")
    cubin = producer.put(b"\x7fELF cubin bytes", "k.cubin")
    meta = producer.put('{"name": "k"}', "k.json", binary=False)
    producer.put_group("k.json", {"k.cubin": cubin, "k.json": meta})
    # Triton's own FileCacheManager reads the producer's dir (Triton 3.6's
    # RemoteCacheManager leaves a group file there that it cannot read).
    assert set(FileCacheManager("KERNELKEY").get_group("k.json")) == {"k.cubin", "k.json"}

    node(monkeypatch, daemon, tmp_path, "node2")  # a fresh node: empty local dir
    consumer = KcacheCacheManager("KERNELKEY")
    group = consumer.get_group("k.json")
    assert set(group) == {"k.cubin", "k.json"}
    assert Path(group["k.cubin"]).read_bytes() == b"\x7fELF cubin bytes"
    assert str(tmp_path / "node2") in group["k.cubin"]
    assert set(FileCacheManager("KERNELKEY").get_group("k.json")) == {"k.cubin", "k.json"}
    assert KcacheCacheManager("OTHERKEY").get_group("k.json") is None


def test_an_incomplete_group_is_a_miss(monkeypatch, daemon, tmp_path):
    node(monkeypatch, daemon, tmp_path, "node1")
    producer = KcacheCacheManager("KEY2")
    path = producer.put(b"x", "a.cubin")
    producer.put_group("a.json", {"a.cubin": path, "a.json": path + ".missing"})
    node(monkeypatch, daemon, tmp_path, "node2")
    assert KcacheCacheManager("KEY2").get_group("a.json") is None
