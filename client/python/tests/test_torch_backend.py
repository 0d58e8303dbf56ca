"""kcache.torch's Inductor backend against a real kcached: values, leases, fail-open."""

import base64
import json
import socket
import threading
import time

import pytest

from torch_support import require_torch

require_torch()

import kcache  # noqa: E402
from kcache.torch import Settings, _values  # noqa: E402
from kcache.torch._session import Session  # noqa: E402
from kcache.torch.inductor_backend import KcacheInductorBackend  # noqa: E402

FX_KEY = "pt2:fx-graph-v1::fabc123:c1"


def backend(url, cache="fx-graph", single_flight=True, **settings):
    session = Session(Settings(url=url, namespace="test", **settings))
    return KcacheInductorBackend(session, cache, single_flight), session


def inductor_value(payload: bytes) -> bytes:
    # What RemoteFxGraphCache's JSON serde hands a backend.
    return bytes(json.dumps({"data": base64.b64encode(payload).decode("ascii"), "time_taken_ms": 42}), "ascii")


def test_values_are_stored_without_base64_and_read_back_the_same(daemon):
    be, session = backend(daemon.url, single_flight=False)
    payload = bytes(range(256)) * 40
    be.put(FX_KEY, inductor_value(payload))
    assert json.loads(be.get(FX_KEY)) == {"data": base64.b64encode(payload).decode("ascii"), "time_taken_ms": 42}

    # Stored: the raw pickle bytes (not 4/3 of them) and the other fields as metadata.
    value, record = kcache.Client(daemon.url).get_entry("torch:test:" + FX_KEY)
    assert value == payload
    assert record["metadata"]["torch_fields"] == '{"time_taken_ms": 42}'
    assert record["metadata"]["inductor_key"] == "fabc123"
    assert record["metadata"]["torch_cache"] == "fx-graph"
    assert session.stats["fx-graph.puts"] == 1 and session.stats["fx-graph.hits"] == 1


def test_other_values_round_trip_byte_for_byte():
    for data in (b'{"data": "not base64!", "x": 1}', b"[1, 2]", b'{"data": "YQ"}', b"\x00binary", b"{"):
        value, metadata = _values.pack(data)
        assert _values.unpack(value, metadata) == data


def test_a_miss_grants_one_rank_the_lease_and_the_others_wait_for_its_put(daemon):
    producer, _ = backend(daemon.url)
    assert producer.get(FX_KEY) is None  # miss: this rank holds the lease now

    waiters = [backend(daemon.url) for _ in range(3)]
    results = [None] * len(waiters)

    def wait(i):
        results[i] = waiters[i][0].get(FX_KEY)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(waiters))]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(0.5)
    assert all(r is None for r in results)  # still waiting: nobody compiles twice
    producer.put(FX_KEY, inductor_value(b"compiled graph"))
    for t in threads:
        t.join(timeout=10)
    elapsed = time.monotonic() - started
    assert all(json.loads(r)["data"] == base64.b64encode(b"compiled graph").decode() for r in results)
    assert 0.5 <= elapsed < 5
    for _, session in waiters:
        assert session.stats["lease_waits"] == 1 and session.stats["hits_after_wait"] == 1
        assert session.stats["leases_granted"] == 0


def test_a_dead_holders_lease_ends_and_a_waiter_takes_over(daemon):
    # A rank that took the lease and died: nobody renews it.
    dead = kcache.Client(daemon.url, fail_open=False)
    assert dead.acquire_lease("torch:test:" + FX_KEY, ttl_s=1.0, holder="dead-rank")["granted"]

    waiter, session = backend(daemon.url)
    started = time.monotonic()
    assert waiter.get(FX_KEY) is None  # the lease ended: this rank compiles
    assert 0.8 <= time.monotonic() - started < 5
    assert session.stats["leases_granted"] == 1
    assert session.leases.held() == 1
    waiter.put(FX_KEY, inductor_value(b"x"))
    assert session.leases.held() == 0


def test_the_heartbeat_keeps_a_slow_compile_s_lease(daemon):
    producer, psession = backend(daemon.url, lease_ttl_s=0.6)
    assert producer.get(FX_KEY) is None
    time.sleep(2.0)  # three TTLs: only the heartbeat keeps the lease
    other = kcache.Client(daemon.url, fail_open=False)
    answer = other.acquire_lease("torch:test:" + FX_KEY, ttl_s=1)
    assert not answer["granted"] and psession.stats["errors"] == 0


def test_a_waiter_stops_waiting_at_its_deadline(daemon):
    producer, _ = backend(daemon.url, lease_ttl_s=30)
    assert producer.get(FX_KEY) is None
    waiter, session = backend(daemon.url, lease_wait_s=0.5)
    started = time.monotonic()
    assert waiter.get(FX_KEY) is None  # compiles itself rather than wait forever
    assert time.monotonic() - started < 3
    assert session.stats["lease_wait_timeouts"] == 1


def test_autotune_and_pgo_entries_take_no_lease(daemon):
    be, session = backend(daemon.url, cache="autotune", single_flight=False)
    assert be.get("pt2:autotune-best-config-v2::abc:c1") is None
    assert session.stats["leases_granted"] == 0 and session.leases.held() == 0


@pytest.fixture
def hung_daemon():
    """Accepts connections and never answers: a kcached that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held = []
    stop = threading.Event()

    def accept():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("kind", ["down", "hung"])
def test_fail_open_a_dead_or_hung_daemon_costs_a_few_timeouts(kind, request):
    url = "http://127.0.0.1:1" if kind == "down" else request.getfixturevalue("hung_daemon")
    be, session = backend(url, timeout_ms=300, trip_after=3, cooldown_s=60)
    started = time.monotonic()
    for i in range(20):
        assert be.get(f"pt2:fx-graph-v1::f{i}:c1") is None
        be.put(f"pt2:fx-graph-v1::f{i}:c1", inductor_value(b"x"))
    # Three failures open the breaker; the other 37 calls are skipped without
    # a request (a bound against hangs, far above 3 timeouts with a retry each).
    assert time.monotonic() - started < 10
    assert session.stats["breaker_trips"] == 1
    assert session.stats["skipped"] >= 37
