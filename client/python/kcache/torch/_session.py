"""One process's connection to kcached for torch.compile's caches.

Fail open: every failure is a miss, counted in stats. After `trip_after`
failures in a row the session stops asking for `cooldown_s` (a circuit
breaker), so a daemon that is down or hanging costs a trainer a few short
timeouts, not one per kernel.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
from typing import Optional

from kcache import Client, KcacheError
from kcache._failopen import FailOpenLog

from . import _keys, _local_entries, _values
from ._hash_details import HashDetailsRecorder
from ._leases import LeaseKeeper
from ._prefetch import Prefetch, fingerprint
from ._tensorify import FloatSpecializations


@dataclasses.dataclass(frozen=True)
class Settings:
    url: str = "http://127.0.0.1:7070"
    namespace: str = "default"
    token: Optional[str] = None
    timeout_ms: int = 1500
    # Single-flight: how long a lease lives without a heartbeat, how long a
    # rank waits for another's compile before compiling itself, and how long a
    # lease is kept for an entry that never comes.
    lease_ttl_s: float = 30.0
    lease_wait_s: float = 600.0
    lease_max_hold_s: float = 1800.0
    trip_after: int = 3
    cooldown_s: float = 30.0
    # End-to-end verification: every entry is checked in libkcache (signed by
    # one of trusted_keys, a PEM file or directory or a ':'-separated list,
    # and its bytes are the signed record's) before it reaches Inductor, which
    # unpickles it; one that fails is a miss.
    verify_signatures: bool = False
    trusted_keys: Optional[str] = None
    # Run manifest and prefetch (see _prefetch): enable() fetches the entries
    # this run's fingerprint read or wrote before, in the background, keeping
    # at most prefetch_max_mb of them in memory.
    prefetch: bool = True
    prefetch_max_mb: int = 512
    # Mega-Cache bundles (see _bundles): a fresh process loads the whole
    # compile of its run (precompile entries included) and skips tracing.
    bundles: bool = False
    # A run that saves a bundle compiles below Dynamo afresh (FX-graph and
    # AOTAutograd lookups miss) for graphs on: "gpu" (where PyTorch 2.11
    # cannot package a graph loaded from its cache), "always" or "never".
    bundle_fresh_compile: str = "gpu"
    # Keep the coordinate-descent configs an earlier run tuned (see _coordesc)
    # rather than tuning each kernel again at its first launch.
    keep_tuned_configs: bool = True
    # Start Inductor's compile workers at the first AOTAutograd or FX-graph
    # miss rather than before the first lookup (see _compile_pool).
    defer_compile_pool: bool = True
    # Remember the floats Dynamo specialized after restarting a frame's trace
    # (dynamic shapes; see _tensorify), so the next process traces it once.
    float_specializations: bool = True
    # The run's compile report (see _report): PUT at exit and every report_interval_s.
    report: bool = True
    report_interval_s: float = 60.0

    ENV = {
        "url": "KCACHE_URL",
        "namespace": "KCACHE_NAMESPACE",
        "token": "KCACHE_TOKEN",
        "timeout_ms": "KCACHE_TORCH_TIMEOUT_MS",
        "lease_ttl_s": "KCACHE_TORCH_LEASE_TTL_S",
        "lease_wait_s": "KCACHE_TORCH_LEASE_WAIT_S",
        "lease_max_hold_s": "KCACHE_TORCH_LEASE_MAX_HOLD_S",
        "trip_after": "KCACHE_TORCH_TRIP_AFTER",
        "cooldown_s": "KCACHE_TORCH_COOLDOWN_S",
        "verify_signatures": "KCACHE_VERIFY_SIGNATURES",
        "trusted_keys": "KCACHE_TRUSTED_KEYS",
        "prefetch": "KCACHE_TORCH_PREFETCH",
        "prefetch_max_mb": "KCACHE_TORCH_PREFETCH_MAX_MB",
        "bundles": "KCACHE_TORCH_BUNDLES",
        "bundle_fresh_compile": "KCACHE_TORCH_BUNDLE_FRESH_COMPILE",
        "keep_tuned_configs": "KCACHE_TORCH_KEEP_TUNED_CONFIGS",
        "defer_compile_pool": "KCACHE_TORCH_DEFER_COMPILE_POOL",
        "float_specializations": "KCACHE_TORCH_FLOAT_SPECIALIZATIONS",
        "report": "KCACHE_TORCH_REPORT",
        "report_interval_s": "KCACHE_TORCH_REPORT_INTERVAL_S",
    }

    @classmethod
    def from_env(cls) -> "Settings":
        values = {}
        for field, var in cls.ENV.items():
            raw = os.environ.get(var)
            if raw:
                kind = type(getattr(cls, field)) if getattr(cls, field) is not None else str
                values[field] = _flag(var, raw) if kind is bool else kind(raw)
        return cls(**values)

    def environment(self) -> dict[str, str]:
        """As environment variables, for the compile workers Inductor starts."""
        return {var: _env_text(getattr(self, f)) for f, var in self.ENV.items() if getattr(self, f) is not None}


def _flag(var: str, raw: str) -> bool:
    # bool("0") is True: flags are read as libkcache reads them.
    text = raw.strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"{var}={raw!r} is not 0/1/true/false")


def _env_text(value) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


class Session:
    def __init__(self, settings: Settings):
        self.settings = settings
        _keys.check_namespace(settings.namespace)
        # Verification asked for but not possible (no usable key) raises here:
        # a session never silently hands Inductor bytes nobody verified.
        self.client = Client(
            settings.url,
            token=settings.token,
            timeout_ms=settings.timeout_ms,
            retries=1,
            verify_signatures=settings.verify_signatures,
            trusted_keys=settings.trusted_keys,
            log_fail_open=False,  # self.events below logs this session's
        )
        if settings.verify_signatures and not self.client.verification_stats().get("enabled"):
            raise KcacheError(2, "verify_signatures is set but libkcache does not verify")
        self.leases = LeaseKeeper(self.client, settings.lease_ttl_s, settings.lease_max_hold_s)
        self.hash_details = HashDetailsRecorder()
        self.stats: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._failures_in_a_row = 0
        self._closed_until = 0.0
        self.prefetch: Optional[Prefetch] = None
        self.bundles = None  # a _bundles.Bundles with settings.bundles, set by enable()
        self.report = None  # a _report.Report with settings.report, set by enable()
        self.compile_pool = None  # a _compile_pool.DeferredPool with settings.defer_compile_pool, set at the hooks
        self.events = FailOpenLog(settings.url)  # one log line per state change

    def start_prefetch(self) -> None:
        """Reads this run's manifest and fetches its entries in the background."""
        if not self.settings.prefetch or self.prefetch is not None:
            return
        key = _keys.manifest_entry(self.settings.namespace, fingerprint())
        self.prefetch = Prefetch(
            key,
            get_entry=self._fetch_entry,
            batch_get=self._fetch_batch,
            put=lambda k, v: self._store(k, v, {"torch_cache": "run-manifest"}, _MANIFEST_PRODUCER),
            stats=self.stats,
            errors=lambda: self.client.errors,
            # A lookup waits for its batch as long as the batch's own request may take.
            wait_s=2 * (self.settings.timeout_ms / 1000) + 1,
            max_bytes=self.settings.prefetch_max_mb << 20,
        )
        self.prefetch.start()

    def float_specializations(self) -> FloatSpecializations:
        """This run's record of specialized floats, read and written under its
        fingerprint through the prefetched set (a listed record comes with it)."""
        key = _keys.float_specializations_entry(self.settings.namespace, fingerprint())

        def load() -> Optional[bytes]:
            # Most runs specialize no float and store no record: a manifest
            # without it saves each of their processes a round trip.
            if self.prefetch is not None and self.prefetch.unlisted(key):
                return None
            found = self.get_entry(key)
            return found[0] if found is not None else None

        return FloatSpecializations(
            load,
            lambda body: self.put(key, body, {"torch_cache": "float-specializations"}, _FLOATS_PRODUCER),
            self.stats,
        )

    def prefetch_to_local_caches(self) -> None:
        """Prefetched FX-graph and AOTAutograd entries go to Inductor's local
        cache dirs (see _local_entries); called once Inductor is imported."""
        if self.prefetch is not None:
            self.prefetch.write_local_from_now(_local_entries.writer())

    # The circuit breaker wraps every call; callers treat None/False as a miss.

    def available(self) -> bool:
        with self._lock:
            if time.monotonic() < self._closed_until:
                self.stats["skipped"] += 1
                return False
            return True

    def _observe(self, errors_before: int) -> None:
        failed = self.client.errors != errors_before
        with self._lock:
            if not failed:
                self._failures_in_a_row = 0
                return
            self.stats["errors"] += 1
            self._failures_in_a_row += 1
            if self._failures_in_a_row >= self.settings.trip_after:
                self._closed_until = time.monotonic() + self.settings.cooldown_s
                self._failures_in_a_row = 0
                self.stats["breaker_trips"] += 1

    def _call(self, fn, *args, **kwargs):
        before = self.client.errors
        started = time.perf_counter()
        result = None
        try:
            result = fn(*args, **kwargs)
            return result
        except (KcacheError, OSError, ValueError):
            self.client.errors += 1  # invalid input is still a miss for a trainer
            return None
        finally:
            # Round trips as the trainer sees them: where a fresh node's time goes.
            name = getattr(fn, "__name__", "call")
            with self._lock:
                self.stats[f"requests.{name}"] += 1
                self.stats[f"request_ms.{name}"] += (time.perf_counter() - started) * 1000
            self._observe(before)
            if fn != self.leases.done:  # bookkeeping, mostly no request: its success says nothing of kcached
                self.events.observe(self.client.errors != before, self.client.last_error)
            if self.settings.verify_signatures and (result is None or (isinstance(result, list) and None in result)):
                self.events.verification(self.client.verification_stats)  # a miss may be a refusal

    # Lookups: the prefetched set first, then kcached. Every hit and put is
    # noted for the run manifest.

    def get_entry(self, key: str, wait_s: float = 0) -> Optional[tuple[bytes, dict]]:
        if self.prefetch is not None and wait_s == 0:
            if (found := self.prefetch.take(key)) is not None:
                value, metadata = found
                self.prefetch.note(key, len(value), metadata)
                return value, {"metadata": metadata}
        found = self._fetch_entry(key, wait_s)
        if found is not None and self.prefetch is not None:
            self.prefetch.note(key, len(found[0]), _values.unpack_metadata(found[1].get("metadata") or {}))
        return found

    def batch_get(self, keys: list[str]) -> list[Optional[bytes]]:
        values: list[Optional[bytes]] = [None] * len(keys)
        if self.prefetch is not None:
            for i, key in enumerate(keys):
                if (found := self.prefetch.take(key)) is not None:
                    values[i] = found[0]
        missing = [i for i, v in enumerate(values) if v is None]
        for i, value in zip(missing, self._fetch_batch([keys[i] for i in missing])):
            values[i] = value
        if self.prefetch is not None:
            for key, value in zip(keys, values):
                if value is not None:
                    self.prefetch.note(key, len(value), {})
        return values

    def put(self, key: str, value: bytes, metadata: dict, producer: str) -> bool:
        stored = self._store(key, value, metadata, producer)
        # Not Triton's files: a cold run writes every autotune candidate's
        # kernel, a fresh node reads a few; the first one to read them lists them.
        if stored and self.prefetch is not None and not key.startswith("triton:"):
            self.prefetch.note(key, len(value), _values.unpack_metadata(metadata))
        return stored

    # kcached itself, through the breaker.

    def _fetch_entry(self, key: str, wait_s: float = 0) -> Optional[tuple[bytes, dict]]:
        if not self.available():
            return None
        return self._call(self.client.get_entry, key, wait_s=wait_s)

    def _fetch_batch(self, keys: list[str]) -> list[Optional[bytes]]:
        if not keys or not self.available():
            return [None] * len(keys)
        return self._call(self.client.batch_get, keys) or [None] * len(keys)

    def _store(self, key: str, value: bytes, metadata: dict, producer: str) -> bool:
        if not self.available():
            return False
        return bool(self._call(self.client.put, key, value, metadata=metadata, producer=producer))

    def acquire(self, key: str) -> str:
        """LeaseKeeper's answer; GRANTED when kcached cannot answer (compile here)."""
        if not self.available():
            return LeaseKeeper.GRANTED
        return self._call(self.leases.acquire, key) or LeaseKeeper.GRANTED

    def done(self, key: str, stored: bool) -> None:
        self._call(self.leases.done, key, stored)

    def close(self) -> None:
        if self.prefetch is not None:
            self.prefetch.close()  # writes the manifest while the client is open
        self.leases.release_all()
        self.client.close()


_MANIFEST_PRODUCER = "kcache.torch (run manifest)"
_FLOATS_PRODUCER = "kcache.torch (float specializations)"

_from_env: dict[Settings, Session] = {}
_from_env_lock = threading.Lock()


def share_with_env(session: Session):
    """enable()'s session also serves this process's session_from_env()
    callers (Triton's cache manager), so they use its prefetched set; returns
    the undo."""
    settings = Settings.from_env()
    with _from_env_lock:
        before = _from_env.get(settings)
        _from_env[settings] = session

    def undo() -> None:
        with _from_env_lock:
            if before is None:
                _from_env.pop(settings, None)
            else:
                _from_env[settings] = before

    return undo


def session_from_env() -> Session:
    """The session of a process that did not call enable() itself (Triton's
    cache manager in Inductor's compile workers): settings from the environment."""
    settings = Settings.from_env()
    with _from_env_lock:
        if settings not in _from_env:
            _from_env[settings] = Session(settings)
        return _from_env[settings]
