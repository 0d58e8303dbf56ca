"""The client class over libkcache's C ABI (prototypes in _native)."""

from __future__ import annotations

import ctypes
import json
import os
from typing import Optional, Sequence

from ._failopen import FailOpenLog
from ._native import Buffer, KcacheError, Options, OptionsExt, Status, last_error, load_library, take


class Compiled:
    """What ``Client.get_or_compile`` returns.

    ``outcome`` is "hit", "compiled", "pending" (async, or the wait ran out:
    run your fallback, a later call hits), "failed" (``job`` holds the error and
    the compiler's log) or "error" (the service could not answer: a miss).
    """

    def __init__(self, outcome: str, binary: Optional[bytes] = None, info: Optional[dict] = None):
        self.outcome = outcome
        self.binary = binary
        self.info = info or {}

    @property
    def ok(self) -> bool:
        return self.binary is not None

    @property
    def job(self) -> dict:
        return self.info.get("job") or {}

    @property
    def lowered_names(self) -> dict:
        meta = (self.info.get("record") or {}).get("metadata") or {}
        return json.loads(meta.get("lowered_names", "{}"))

    def __repr__(self) -> str:
        size = len(self.binary) if self.binary is not None else None
        return f"Compiled(outcome={self.outcome!r}, bytes={size})"


def _paths(paths) -> Optional[bytes]:
    """None, a path, or a list of paths -> libkcache's ':'-separated list."""
    if paths is None:
        return None
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    return b":".join(os.fsencode(p) for p in paths)


class Client:
    """A thread-safe client; connections are pooled inside libkcache."""

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout_ms: int = 2000,
        retries: int = 2,
        fail_open: bool = True,
        ca_file: Optional[str] = None,
        client_cert: Optional[str] = None,
        client_key: Optional[str] = None,
        verify_signatures: Optional[bool] = None,
        trusted_keys=None,
        log_fail_open: bool = True,
    ):
        """url: http://, https:// or unix://. For https://, ca_file is the CA
        bundle that signs kcached's certificate (None: $KCACHE_CA_FILE, else
        the system's CAs); client_cert and client_key a certificate for mTLS
        (None: $KCACHE_CLIENT_CERT, $KCACHE_CLIENT_KEY).

        verify_signatures=True: every value get, batch_get and get_or_compile
        return is signed by one of trusted_keys (a PEM file or directory of
        public keys, or a list of them) and its bytes are the signed record's;
        anything else is a miss, counted in verification_stats(). None:
        $KCACHE_VERIFY_SIGNATURES and $KCACHE_TRUSTED_KEYS."""
        self._lib = load_library()
        self.fail_open = fail_open
        self.errors = 0
        self.last_error = ""
        self.last_status = Status.OK  # of the last failed call
        # Failing open logs through logging (logger "kcache"): one WARNING when
        # kcached stops answering, one when it answers again (_failopen.py).
        # kcache.torch's session logs its own, so it passes False.
        url = url or os.environ.get("KCACHE_URL") or "http://127.0.0.1:7070"
        self._events = FailOpenLog(url) if fail_open and log_fail_open else None
        opts = Options(
            url.encode(),
            token.encode() if token else None,
            int(timeout_ms),
            int(retries),
        )
        ext = OptionsExt(
            ctypes.sizeof(OptionsExt),
            os.fsencode(ca_file) if ca_file else None,
            os.fsencode(client_cert) if client_cert else None,
            os.fsencode(client_key) if client_key else None,
            _paths(trusted_keys),
            0 if verify_signatures is None else (1 if verify_signatures else -1),
        )
        handle = ctypes.c_void_p()
        status = self._lib.kcache_client_open_ext(ctypes.byref(opts), ctypes.byref(ext), ctypes.byref(handle))
        if status != Status.OK:
            raise KcacheError(status, last_error(self._lib))
        self._handle = handle

    def close(self) -> None:
        if getattr(self, "_handle", None):
            self._lib.kcache_client_close(self._handle)
            self._handle = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _failed(self, status: int) -> None:
        self.errors += 1
        self.last_status = status
        self.last_error = last_error(self._lib)
        if not self.fail_open or status == Status.ERR_INVALID:
            raise KcacheError(status, self.last_error)
        if self._events is not None:
            self._events.observe(True, self.last_error)

    def _answered(self) -> None:
        # Cheap when nothing failed: the lock is taken only to log the recovery.
        if self._events is not None and self._events.failing:
            self._events.observe(False)

    @staticmethod
    def _key(key: str) -> bytes:
        if not isinstance(key, str):
            raise TypeError("kcache keys are str")
        return key.encode()

    def get(self, key: str, wait_s: float = 0) -> Optional[bytes]:
        """The value, or None on a miss. With wait_s, a miss while another
        producer holds the key's lease waits (up to wait_s) for its put."""
        buf = Buffer()
        if wait_s > 0:
            status = self._lib.kcache_get_wait(self._handle, self._key(key), int(wait_s * 1000), ctypes.byref(buf))
        else:
            status = self._lib.kcache_get(self._handle, self._key(key), ctypes.byref(buf))
        if status == Status.OK:
            self._answered()
            return take(self._lib, buf)
        if status != Status.MISS:
            self._failed(status)
        else:
            self._answered()
        return None

    def put(
        self, key: str, data: bytes, metadata: Optional[dict] = None, producer: Optional[str] = None
    ) -> bool:
        """Stores data under key. metadata (name -> text, or any JSON value,
        kept as its JSON text) goes into the entry's action record, where
        `kcache show` and `kcache explain` read it."""
        data = bytes(data)
        if metadata is None and producer is None:
            status = self._lib.kcache_put(self._handle, self._key(key), data, len(data))
        else:
            record = {"metadata": metadata or {}}
            if producer:
                record["producer"] = producer
            status = self._lib.kcache_put_record(
                self._handle, self._key(key), json.dumps(record).encode(), data, len(data)
            )
        if status != Status.OK:
            self._failed(status)
            return False
        self._answered()
        return True

    def get_entry(self, key: str, wait_s: float = 0) -> Optional[tuple[bytes, dict]]:
        """(value, action record) or None on a miss; wait_s as in get()."""
        value, record = Buffer(), Buffer()
        status = self._lib.kcache_get_record(
            self._handle, self._key(key), int(wait_s * 1000), ctypes.byref(value), ctypes.byref(record)
        )
        if status == Status.OK:
            data = take(self._lib, value)
            return data, json.loads(take(self._lib, record) or b"{}")
        if status != Status.MISS:
            self._failed(status)
        return None

    def exists(self, key: str) -> bool:
        status = self._lib.kcache_exists(self._handle, self._key(key))
        if status not in (Status.OK, Status.MISS):
            self._failed(status)
        else:
            self._answered()
        return status == Status.OK

    def batch_get(self, keys: Sequence[str]) -> list[Optional[bytes]]:
        n = len(keys)
        if n == 0:
            return []
        c_keys = (ctypes.c_char_p * n)(*[self._key(k) for k in keys])
        bufs = (Buffer * n)()
        statuses = (ctypes.c_int * n)()
        status = self._lib.kcache_batch_get(self._handle, c_keys, n, bufs, statuses)
        if status != Status.OK:
            self._failed(status)
            return [None] * n
        return [take(self._lib, bufs[i]) if statuses[i] == Status.OK else None for i in range(n)]

    def stats(self) -> dict:
        buf = Buffer()
        status = self._lib.kcache_stats(self._handle, ctypes.byref(buf))
        if status != Status.OK:
            self._failed(status)
            return {}
        return json.loads(take(self._lib, buf))

    # kcache.torch's compile reports (/v1/runs): one JSON object per process of a run.

    def put_run_report(self, namespace: str, run: str, rank: str, report: dict) -> bool:
        """Stores one process's report under namespace/run/rank (write role)."""
        status = self._lib.kcache_run_report_put(
            self._handle, namespace.encode(), run.encode(), rank.encode(), json.dumps(report).encode()
        )
        if status != Status.OK:
            self._failed(status)
            return False
        return True

    def runs(self, namespace: str = "", limit: int = 50) -> list:
        """Runs with reports, newest first: {"namespace", "run", "ranks", "started_ms",
        "host", "compile_seconds", "hits", "misses", "recompiles", "graph_breaks"}."""
        buf = Buffer()
        status = self._lib.kcache_runs(self._handle, namespace.encode(), int(limit), ctypes.byref(buf))
        if status != Status.OK:
            self._failed(status)
            return []
        return json.loads(take(self._lib, buf))["runs"]

    def run(self, namespace: str, run: str) -> Optional[dict]:
        """{"namespace", "run", "reports": {rank: report}}, or None when there is none."""
        buf = Buffer()
        status = self._lib.kcache_run(self._handle, namespace.encode(), run.encode(), ctypes.byref(buf))
        if status == Status.MISS:
            return None
        if status != Status.OK:
            self._failed(status)
            return None
        return json.loads(take(self._lib, buf))

    def verification_stats(self) -> dict:
        """What end-to-end verification did: {"enabled", "verified",
        "rejected": {reason: n}, "rejected_total", "last_rejection",
        "cache_hits", "cache_misses"} (records whose signature was checked
        before in this process skip Ed25519: cache_hits)."""
        buf = Buffer()
        status = self._lib.kcache_verification_stats(self._handle, ctypes.byref(buf))
        if status != Status.OK:
            self._failed(status)
            return {}
        return json.loads(take(self._lib, buf))

    # Compile jobs. A spec is a dict (or JSON text) in kcache's compile-spec
    # format: {"backend": "cuda", "source": {"name": ..., "text": ...},
    # "name_expressions": [...], "options": [...], "target": "sm_90a", "output": "cubin"}.

    @staticmethod
    def _spec(spec) -> bytes:
        return (spec if isinstance(spec, str) else json.dumps(spec)).encode()

    def submit(self, spec, key: Optional[str] = None, priority: int = 0, manifest=None) -> dict:
        """Submits a compile; returns the daemon's answer ({"status", "job", ...}).

        manifest: a kc1- key's key manifest (dict or JSON text): the result is
        published under the key when the token may write the manifest's
        namespace (key None: the manifest's key); else "client_key_refused" says why.
        """
        buf = Buffer()
        status = self._lib.kcache_submit_manifest(
            self._handle,
            self._key(key) if key else None,
            self._spec(spec),
            self._spec(manifest) if manifest is not None else None,
            int(priority),
            ctypes.byref(buf),
        )
        if status in (Status.OK, Status.BUSY):
            return json.loads(take(self._lib, buf))
        self._failed(status)
        return {"status": "error", "message": self.last_error}

    def wait(self, job_id: str, timeout_s: float = 60.0) -> dict:
        """The job once finished, or as it is when timeout_s passes."""
        buf = Buffer()
        status = self._lib.kcache_job_wait(self._handle, job_id.encode(), int(timeout_s * 1000), ctypes.byref(buf))
        if status in (Status.OK, Status.PENDING):
            return json.loads(take(self._lib, buf))
        self._failed(status)
        return {"id": job_id, "state": "unknown", "error": {"message": self.last_error}}

    def get_or_compile(self, key: str, spec, wait: bool = True, timeout_s: float = 300.0) -> Compiled:
        """A hit, or a compile through the service.

        wait=True blocks until the compile finishes (up to timeout_s);
        wait=False submits and returns "pending" at once, so the caller can run
        its fallback while the service compiles.
        """
        binary, info = Buffer(), Buffer()
        status = self._lib.kcache_get_or_compile(
            self._handle,
            self._key(key),
            self._spec(spec),
            0 if wait else 1,
            int(timeout_s * 1000),
            ctypes.byref(binary),
            ctypes.byref(info),
        )
        details = json.loads(take(self._lib, info) or b"{}")
        if status == Status.OK:
            return Compiled(details.get("outcome", "hit"), take(self._lib, binary), details)
        if status in (Status.PENDING, Status.COMPILE_FAILED, Status.BUSY):
            self.last_error = last_error(self._lib)
            outcome = {Status.PENDING: "pending", Status.COMPILE_FAILED: "failed"}.get(status, "pending")
            return Compiled(outcome, None, details)
        self._failed(status)
        return Compiled("error", None, {})

    # Leases: single-flight for producers outside the service. The first
    # caller gets {"granted": True, "token": ...} and produces; the others get
    # {"granted": False, "holder": ...} (or {"cached": True}) and wait in
    # get(key, wait_s=...). Failing open, a daemon that cannot answer grants
    # the lease with token None ("offline"): the caller compiles as if alone.

    def acquire_lease(self, key: str, ttl_s: float = 30.0, holder: str = "") -> dict:
        token, info = Buffer(), Buffer()
        status = self._lib.kcache_lease_acquire(
            self._handle, self._key(key), int(ttl_s * 1000), holder.encode(), ctypes.byref(token), ctypes.byref(info)
        )
        if status in (Status.OK, Status.MISS):
            result = json.loads(take(self._lib, info) or b"{}")
            raw = take(self._lib, token)
            result["token"] = raw.rstrip(b"\0").decode() if status == Status.OK else None
            return result
        self._failed(status)
        return {"granted": True, "token": None, "offline": True}

    def renew_lease(self, key: str, token: Optional[str], ttl_s: float = 30.0) -> bool:
        if token is None:
            return True  # an offline lease needs no heartbeat
        status = self._lib.kcache_lease_renew(self._handle, self._key(key), token.encode(), int(ttl_s * 1000))
        if status not in (Status.OK, Status.ERR_REJECTED):
            self._failed(status)
        return status == Status.OK

    def release_lease(self, key: str, token: Optional[str]) -> None:
        if token is None:
            return
        status = self._lib.kcache_lease_release(self._handle, self._key(key), token.encode())
        # REJECTED: the lease already ended (a put ends it; so does its TTL).
        if status not in (Status.OK, Status.ERR_REJECTED):
            self._failed(status)
