import os
import signal
import threading
import time

import pytest

import kcache


def test_put_get_exists_roundtrip(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    assert c.get("k1") is None
    assert not c.exists("k1")
    payload = bytes(range(256)) * 100  # binary, with NUL bytes
    assert c.put("k1", payload)
    assert c.exists("k1")
    assert c.get("k1") == payload
    assert c.put("k1", b"")  # an empty value is a value, not a miss
    assert c.get("k1") == b""


def test_large_value(daemon):
    c = kcache.Client(daemon.url, fail_open=False, timeout_ms=20000)
    big = os.urandom(16 << 20)
    assert c.put("big", big)
    assert c.get("big") == big


def test_batch_get(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    for i in range(10):
        c.put(f"b{i}", f"value-{i}".encode())
    keys = [f"b{i}" for i in range(12)]
    got = c.batch_get(keys)
    assert got[:10] == [f"value-{i}".encode() for i in range(10)]
    assert got[10:] == [None, None]
    assert c.batch_get([]) == []


def test_stats_counts_traffic(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    c.put("s", b"x")
    c.get("s")
    c.get("missing")
    stats = c.stats()
    assert stats["hits"] >= 1 and stats["misses"] >= 1
    assert [t["name"] for t in stats["tiers"]] == ["memory", "rocksdb"]


def test_invalid_key_raises_even_when_failing_open(daemon):
    c = kcache.Client(daemon.url)
    with pytest.raises(kcache.KcacheError):
        c.get("has a space")
    with pytest.raises(TypeError):
        c.get(b"bytes-key")


def test_fail_open_when_daemon_dies(daemon):
    c = kcache.Client(daemon.url, timeout_ms=500)
    assert c.put("x", b"1")
    daemon.stop(signal.SIGKILL)
    start = time.monotonic()
    for _ in range(20):
        assert c.get("x") is None  # a miss, never an exception
        assert not c.put("y", b"2")
    assert time.monotonic() - start < 5
    assert c.errors >= 20
    assert "kcached" in c.last_error or "backing off" in c.last_error
    strict = kcache.Client(daemon.url, timeout_ms=300, fail_open=False)
    with pytest.raises(kcache.KcacheError) as e:
        strict.get("x")
    assert e.value.status in (kcache.Status.ERR_UNAVAILABLE, kcache.Status.ERR_TIMEOUT)


def test_restart_keeps_entries(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    c.put("durable", b"on disk")
    daemon.stop()
    daemon.start()
    c2 = kcache.Client(daemon.url, fail_open=False)
    assert c2.get("durable") == b"on disk"


def test_threads_share_a_client(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    errors = []

    def work(t):
        try:
            for i in range(50):
                key = f"t{t}-{i}"
                data = f"{t}:{i}".encode() * 10
                assert c.put(key, data)
                assert c.get(key) == data
        except Exception as e:  # collected, asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_entries_keep_their_metadata(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    assert c.put("with-meta", b"value", metadata={"why": "because", "n": 3, "lines": ["a", "b"]}, producer="test")
    value, record = c.get_entry("with-meta")
    assert value == b"value"
    assert record["producer"] == "test"
    # Strings as they are; any other JSON value as its JSON text.
    assert record["metadata"] == {"why": "because", "n": "3", "lines": '["a","b"]'}
    assert c.get_entry("no-such-entry") is None


def test_a_malformed_record_is_refused_not_stored(daemon):
    c = kcache.Client(daemon.url)
    lib = kcache.load_library()
    for record in (b"not json", b"[1]", b'{"metadata": 5}', b'{"producer": 1}'):
        status = lib.kcache_put_record(c._handle, b"bad-record", record, b"x", 1)
        assert status == kcache.Status.ERR_INVALID, record
        assert b"kcache_put_record" in lib.kcache_last_error()
    assert c.get("bad-record") is None
