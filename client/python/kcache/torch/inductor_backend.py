"""kcache as the backend of Inductor's remote caches.

Inductor's RemoteCache classes take a backend through backend_override_cls,
called with no arguments; enable() sets it to a partial of
KcacheInductorBackend for each of the five caches. The backend sees
RedisRemoteCache's keys ("pt2:{cache_id}::{key}:c1") and JSON bytes.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Optional

import torch
from torch._inductor.remote_cache import RemoteCacheBackend

from . import _keys, _values
from ._leases import LeaseKeeper
from ._session import Session

# backend_override_cls attribute of torch._inductor.remote_cache -> our name.
CACHES = {
    "RemoteFxGraphCache": "fx-graph",
    "RemoteAOTAutogradCache": "aot-autograd",
    "RemoteAutotuneCache": "autotune",
    "RemoteBundledAutotuneCache": "bundled-autotune",
    "RemoteDynamoPGOCache": "dynamo-pgo",
}

# Entries worth single-flight: each is a whole graph's compile. A kernel's
# autotune entry is produced inside one; PGO profiles are written by every rank.
SINGLE_FLIGHT = frozenset({"fx-graph", "aot-autograd"})

_PRODUCER = f"kcache.torch (torch {torch.__version__})"


def install(session: Session) -> dict:
    """kcache as the backend of all five caches; returns the previous backends."""
    import torch._inductor.remote_cache as remote_cache

    previous = {}
    for class_name, cache in CACHES.items():
        cls = getattr(remote_cache, class_name)
        previous[class_name] = cls.backend_override_cls
        cls.backend_override_cls = functools.partial(KcacheInductorBackend, session, cache, cache in SINGLE_FLIGHT)
    return previous


def restore(previous: dict) -> None:
    import torch._inductor.remote_cache as remote_cache

    for class_name, backend in previous.items():
        getattr(remote_cache, class_name).backend_override_cls = backend


class KcacheInductorBackend(RemoteCacheBackend[bytes]):
    def __init__(self, session: Session, cache: str, single_flight: bool):
        super().__init__()
        self._session = session
        self._cache = cache
        self._single_flight = single_flight

    def _entry(self, key: str) -> str:
        return _keys.inductor_entry(self._session.settings.namespace, key)

    def _read(self, entry: str, wait_s: float = 0) -> Optional[bytes]:
        found = self._session.get_entry(entry, wait_s=wait_s)
        if found is None:
            return None
        value, record = found
        stats = self._session.stats
        stats[f"{self._cache}.hits"] += 1
        stats["bytes_read"] += len(value)
        return _values.unpack(value, record.get("metadata") or {})

    def _get(self, key: str) -> Optional[bytes]:
        entry = self._entry(key)
        stats = self._session.stats
        if (data := self._read(entry)) is not None:
            return data
        stats[f"{self._cache}.misses"] += 1
        if not self._single_flight:
            return None
        deadline = time.monotonic() + self._session.settings.lease_wait_s
        while True:
            state = self._session.acquire(entry)
            if state == LeaseKeeper.GRANTED:
                stats["leases_granted"] += 1
                return None  # this rank compiles; _put lets the others go
            if state == LeaseKeeper.CACHED:  # put between our get and our ask
                if (data := self._read(entry)) is not None:
                    return data
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                stats["lease_wait_timeouts"] += 1
                return None  # waited long enough: compile here too
            if state == LeaseKeeper.HELD:
                stats["lease_waits"] += 1
                started = time.monotonic()
                data = self._read(entry, wait_s=remaining)
                stats["lease_wait_ms"] += int((time.monotonic() - started) * 1000)
                if data is not None:
                    stats["hits_after_wait"] += 1
                    return data
            # The holder let go without a put, or died: ask again.

    def _put(self, key: str, data: bytes) -> None:
        entry = self._entry(key)
        stored = False
        try:
            value, metadata = _values.pack(bytes(data))
            cache_id, inductor_key = _keys.split_inductor_key(key)
            metadata["torch_cache"] = self._cache
            metadata["inductor_key"] = inductor_key
            if cache_id:
                metadata["inductor_cache_id"] = cache_id
            if (lines := self._session.hash_details.lines(inductor_key)) is not None:
                metadata["hash_details"] = json.dumps(lines)
            stored = self._session.put(entry, value, metadata, _PRODUCER)
            if stored:
                self._session.stats[f"{self._cache}.puts"] += 1
                self._session.stats["bytes_written"] += len(value)
        finally:
            if self._single_flight:
                self._session.done(entry, stored)
