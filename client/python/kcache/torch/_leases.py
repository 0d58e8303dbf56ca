"""Single-flight across ranks: the leases this process holds.

On a miss, the first rank to ask gets the key's lease from kcached and
compiles; the others wait in a get for its put. A heartbeat thread renews the
leases held here until their entries are put, so a slow compile keeps its
lease and a dead rank's lease ends after one TTL. A lease whose entry never
comes (Inductor gave up on caching that graph) is dropped after max_hold_s,
and every lease still held is released when the process exits.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from typing import Optional

from kcache import Client


def holder_name() -> str:
    rank = os.environ.get("RANK") or os.environ.get("LOCAL_RANK")
    where = f"{socket.gethostname()}:{os.getpid()}"
    return f"{where}:rank{rank}" if rank is not None else where


class LeaseKeeper:
    GRANTED = "granted"  # this process produces the entry
    HELD = "held"  # another producer does: wait for its put
    CACHED = "cached"  # put meanwhile: read it

    def __init__(self, client: Client, ttl_s: float, max_hold_s: float):
        self._client = client
        self._ttl_s = ttl_s
        self._max_hold_s = max_hold_s
        self._holder = holder_name()
        self._held: dict[str, tuple[Optional[str], float]] = {}  # key -> (token, since)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None
        atexit.register(self.release_all)

    def acquire(self, key: str) -> str:
        answer = self._client.acquire_lease(key, ttl_s=self._ttl_s, holder=self._holder)
        if answer.get("cached"):
            return self.CACHED
        if not answer.get("granted"):
            return self.HELD
        with self._lock:
            self._held[key] = (answer.get("token"), time.monotonic())
        self._start_heartbeat()
        return self.GRANTED

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def done(self, key: str, stored: bool = False) -> None:
        """The entry is put (stored) or will not be: let the waiters go. A put
        already ended the lease in kcached and woke them; otherwise release it."""
        with self._lock:
            token, _ = self._held.pop(key, (None, 0.0))
        if not stored:
            self._client.release_lease(key, token)

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for key, (token, _) in held.items():
            self._client.release_lease(key, token)
        self._wake.set()

    def _start_heartbeat(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(target=self._heartbeat, name="kcache-leases", daemon=True)
            self._thread.start()

    def _heartbeat(self) -> None:
        while True:
            self._wake.wait(self._ttl_s / 3)
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                if not self._held:
                    self._thread = None
                    return
                held = list(self._held.items())
            for key, (token, since) in held:
                if now - since > self._max_hold_s:
                    self.done(key)
                elif not self._client.renew_lease(key, token, ttl_s=self._ttl_s):
                    with self._lock:  # lost it (expired): the waiters have moved on
                        self._held.pop(key, None)
