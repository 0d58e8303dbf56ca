"""A run manifest, and the prefetch it makes possible.

A fresh node spends part of its start-up in one kcached round trip per cache
lookup (FX graph, AOTAutograd, autotune, Triton file), each waited for in turn
while Inductor compiles. A run records the entries it read and wrote in a
manifest under its namespace and a run fingerprint ($KCACHE_RUN_ID, else the
script, its arguments and the torch version). enable() reads that manifest and
fetches every entry in it with /v1/batch/get in a background thread, while
Python imports, builds the model and traces; a lookup of a listed entry then
waits for its batch (if still in flight) and is answered from memory.

- Bounded: at most max_keys entries and max_bytes of values are kept; an entry
  is dropped from memory once used.
- Verified: batch_get goes through libkcache, which verifies values as it does
  single gets when verification is on; a value it refuses is a miss here and
  the lookup asks kcached itself.
- Fail open: with kcached down, the manifest read fails once (counted as
  prefetch_errors) and every lookup goes its usual way.
- The manifest is written at exit, every save_interval_s while entries are
  added (a preempted job still leaves one), and only when this run used
  entries the manifest did not list; it keeps the last max_keys of them.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import sys
import threading
import time
from typing import Callable, Optional

from . import _keys

MANIFEST_VERSION = 1
_BATCH_BYTES = 16 << 20  # one /v1/batch/get answer stays well inside a request timeout
_BATCH_KEYS = 1000  # kcached accepts 10,000


def fingerprint() -> str:
    """The run's name: $KCACHE_RUN_ID, else script + argv + torch version."""
    run_id = os.environ.get("KCACHE_RUN_ID")
    if run_id:
        text = "run-id\0" + run_id
    else:
        import torch

        script = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else "<interactive>"
        text = "\0".join(["argv", script, *sys.argv[1:], torch.__version__])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Prefetch:
    """The prefetched entries of one process. get_entry(key) -> (value, record)
    or None; batch_get(keys) -> values or Nones; put(key, value, metadata) -> bool:
    the session's fail-open calls."""

    def __init__(
        self,
        manifest_key: str,
        get_entry: Callable,
        batch_get: Callable,
        put: Callable,
        stats,
        errors: Callable[[], int],
        wait_s: float,
        write_local: Optional[Callable[[str, bytes, dict], bool]] = None,
        max_keys: int = 4096,
        max_bytes: int = 512 << 20,
        save_interval_s: float = 30.0,
    ):
        self.manifest_key = manifest_key
        self._get_entry, self._batch_get, self._put = get_entry, batch_get, put
        self._stats = stats
        self._errors = errors  # the session's error count: a miss and a failure look alike
        self._write_local = write_local
        self._wait_s = wait_s
        self._max_keys, self._max_bytes = max_keys, max_bytes
        self._save_interval_s = save_interval_s
        self._lock = threading.Lock()
        self._listed: dict[str, tuple[int, dict]] = {}  # the manifest read: key -> (size, metadata)
        self._pending: dict[str, threading.Event] = {}  # listed keys whose batch is in flight
        self._values: dict[str, tuple[bytes, dict]] = {}  # fetched, not yet used
        self._used: dict[str, tuple[int, dict]] = {}  # read or written by this run, in order
        self._covered: frozenset[str] = frozenset()  # Inductor keys a loaded compile bundle carries
        self._dirty = False
        self._manifest_read = False  # a whole manifest was found: what it does not list, this run did not use
        self._loaded = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kcache-prefetch", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    # -------------------------------------------------------------- lookups

    def take(self, key: str) -> Optional[tuple[bytes, dict]]:
        """The prefetched (value, metadata) of key, waiting for its batch if it
        is in flight; None if the manifest does not list it or it did not come."""
        started = time.monotonic()
        try:
            if not self._loaded.wait(self._wait_s):
                return None
            with self._lock:
                event = self._pending.get(key)
            if event is not None and not event.wait(self._wait_s):
                self._stats["prefetch_wait_timeouts"] += 1
                return None
        finally:  # how long lookups waited for the manifest and their batch
            self._stats["prefetch_wait_ms"] += (time.monotonic() - started) * 1000
        with self._lock:
            found = self._values.pop(key, None)
        if found is not None:
            self._stats["prefetch_hits"] += 1
        return found

    def unlisted(self, key: str) -> bool:
        """Whether this run's manifest was read and does not list key (which
        the run that wrote it then never read nor wrote): a lookup kcached
        need not be asked. False while the manifest is not (yet) known."""
        if not self._loaded.wait(self._wait_s):
            return False
        with self._lock:
            return self._manifest_read and key not in self._listed

    def note(self, key: str, size: int, metadata: dict) -> None:
        """key was read or written by this run: it belongs in the manifest."""
        with self._lock:
            self._used[key] = (size, metadata)
            if key not in self._listed:
                self._dirty = True

    def covered_by_bundle(self, inductor_keys: set[str]) -> None:
        """A loaded compile bundle put these FX-graph and AOTAutograd entries
        (Inductor's keys) in the local caches itself: they are neither
        written there nor kept in memory, and the manifest drops them, so
        the next run that loads the bundle does not fetch them beside it."""
        with self._lock:
            self._covered = frozenset(inductor_keys)
            covered = [k for k in self._values if self._is_covered(k)]
            for key in covered:
                del self._values[key]
            written = [k for k in self._used if self._is_covered(k)]  # before the bundle loaded
            for key in written:
                del self._used[key]
            self._stats["prefetch_covered_by_bundle"] += len(covered) + len(written)
            self._dirty = self._dirty or any(self._is_covered(k) for k in self._listed)

    def _is_covered(self, key: str) -> bool:
        """Whether kcache's entry key ("torch:<namespace>:<Inductor's remote key>") is one the bundle carries."""
        if not self._covered:
            return False
        return _keys.split_inductor_key(key.split(":", 2)[-1])[1] in self._covered

    # -------------------------------------------------------------- manifest

    def _run(self) -> None:
        try:
            self._load()
        finally:
            with self._lock:
                for event in self._pending.values():
                    event.set()
                self._pending.clear()
            self._loaded.set()
        while not self._stop.wait(self._save_interval_s):
            self.save()

    def _load(self) -> None:
        errors = self._errors()
        found = self._get_entry(self.manifest_key)
        if found is None:
            failed = self._errors() != errors
            self._stats["prefetch_errors" if failed else "prefetch_manifest_misses"] += 1
            return
        try:
            doc = json.loads(found[0])
            entries = [(str(k), int(n), dict(m)) for k, n, m in doc["entries"]][: self._max_keys]
        except (ValueError, KeyError, TypeError):
            self._stats["prefetch_errors"] += 1
            return
        chosen, total = [], 0
        for key, size, metadata in entries:
            if total + size > self._max_bytes:
                continue
            chosen.append((key, size, metadata))
            total += size
        batches = _batches(chosen)
        events = [threading.Event() for _ in batches]
        with self._lock:
            self._manifest_read = len(entries) < self._max_keys  # a full one may have left keys out
            self._listed = {k: (n, m) for k, n, m in entries}
            for batch, event in zip(batches, events):
                for key, _, _ in batch:
                    self._pending[key] = event
        self._loaded.set()  # lookups may wait for their batch from here on
        self._stats["prefetch_listed"] += len(entries)
        for batch, event in zip(batches, events):
            errors = self._errors()
            values = self._batch_get([k for k, _, _ in batch])
            failed = self._errors() != errors
            if failed:
                self._stats["prefetch_errors"] += 1
            with self._lock:
                for (key, _, metadata), value in zip(batch, values):
                    self._pending.pop(key, None)
                    if value is None and failed:
                        continue  # not known to be gone: the manifest keeps it
                    if value is None:
                        self._stats["prefetch_absent"] += 1
                        self._listed.pop(key, None)  # gone from kcached: the next manifest drops it
                        self._dirty = True
                        continue
                    self._stats["prefetch_bytes"] += len(value)
                    if self._local(key, value, metadata):
                        continue
                    self._values[key] = (value, metadata)
            event.set()
            self._stats["prefetch_batches"] += 1

    def write_local_from_now(self, write_local: Callable[[str, bytes, dict], bool]) -> None:
        """Entries go to Inductor's local cache from now on, those fetched so
        far at once. Called by the thread that imported Inductor, at its
        first compile: the prefetch thread must not import torch modules
        while the trainer imports its own."""
        with self._lock:
            self._write_local = write_local
            for key, (value, metadata) in list(self._values.items()):
                if self._local(key, value, metadata):
                    del self._values[key]

    def _local(self, key: str, value: bytes, metadata: dict) -> bool:
        """Writes a fetched entry to Inductor's local cache (the caller holds
        the lock); a written entry counts as used by this run."""
        if self._is_covered(key):
            self._stats["prefetch_covered_by_bundle"] += 1
            return True  # the bundle put it there: handled, and not used by this run
        if self._write_local is None:
            return False
        try:
            written = self._write_local(key, value, metadata)
        except OSError:
            self._stats["prefetch_local_errors"] += 1
            return False
        if written:
            self._stats["prefetch_local_writes"] += 1
            self._used[key] = (len(value), metadata)  # Inductor reads it from disk now: used
        return written

    def save(self) -> bool:
        """Writes the manifest if this run used entries it did not list, or,
        having been served from it, used a different set."""
        with self._lock:
            # Asked for prefetched entries: a fresh node's run, and what it used
            # is what the next one needs (a cold run lists everything it wrote,
            # most of it never read). A warm node reads its own disk: it adds.
            served = self._stats["prefetch_hits"] > 0
            if served:
                self._dirty = self._dirty or self._used.keys() != self._listed.keys()
            if not self._dirty:
                return False
            self._dirty = False
            # In the order this run first used them (the first batch holds what
            # is looked up first), then the ones listed before and not used.
            merged = dict(self._used)
            if not served:
                for key, entry in self._listed.items():
                    if not self._is_covered(key):
                        merged.setdefault(key, entry)
            entries = [[k, n, m] for k, (n, m) in list(merged.items())[: self._max_keys]]
            self._listed = {k: (n, m) for k, n, m in entries}
        body = json.dumps({"version": MANIFEST_VERSION, "entries": entries}, separators=(",", ":"))
        if self._put(self.manifest_key, body.encode()):
            self._stats["prefetch_manifest_puts"] += 1
            return True
        return False

    def close(self) -> None:
        atexit.unregister(self.close)
        self._stop.set()
        self.save()
        with self._lock:
            self._values.clear()


def _batches(entries: list[tuple[str, int, dict]]) -> list[list[tuple[str, int, dict]]]:
    out: list[list[tuple[str, int, dict]]] = []
    size = 0
    for entry in entries:
        if not out or len(out[-1]) >= _BATCH_KEYS or size + entry[1] > _BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(entry)
        size += entry[1]
    return out
