"""Leases through the Python client: one producer, the others wait for its put."""

import threading
import time

import kcache


def test_the_first_produces_and_the_others_wait(daemon):
    rank0 = kcache.Client(daemon.url, fail_open=False)
    rank1 = kcache.Client(daemon.url, fail_open=False)
    lease = rank0.acquire_lease("py-fx-1", ttl_s=10, holder="rank0")
    assert lease["granted"] and lease["token"]
    held = rank1.acquire_lease("py-fx-1", ttl_s=10, holder="rank1")
    assert not held["granted"] and held["holder"] == "rank0"

    got = {}
    start = time.monotonic()
    waiter = threading.Thread(target=lambda: got.update(value=rank1.get("py-fx-1", wait_s=20)))
    waiter.start()
    time.sleep(0.3)
    assert rank0.put("py-fx-1", b"compiled graph")
    waiter.join(timeout=10)
    assert got["value"] == b"compiled graph"
    assert 0.25 <= time.monotonic() - start < 5

    assert rank1.acquire_lease("py-fx-1")["cached"]


def test_renew_and_release(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    lease = c.acquire_lease("py-fx-2", ttl_s=0.5)
    assert c.renew_lease("py-fx-2", lease["token"], ttl_s=0.5)
    assert not c.renew_lease("py-fx-2", "not-the-token")
    c.release_lease("py-fx-2", lease["token"])
    assert c.acquire_lease("py-fx-2")["granted"]


def test_leases_fail_open_without_a_daemon():
    c = kcache.Client("http://127.0.0.1:1", timeout_ms=300)
    lease = c.acquire_lease("py-fx-3")
    assert lease == {"granted": True, "token": None, "offline": True}
    assert c.renew_lease("py-fx-3", None)
    assert c.get("py-fx-3", wait_s=5) is None
