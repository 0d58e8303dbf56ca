"""libkcache's C ABI as ctypes sees it: the status codes, the structs, and one
table of function prototypes, checked against the library's ABI version once
when it is first loaded. Nothing else in the package touches ctypes' loader."""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Iterable

ABI_VERSION = 8  # 6: kcache_client_open_ext (TLS, verification); 7: kcache_submit_manifest; 8: run reports


class Status:
    OK = 0
    MISS = 1
    ERR_INVALID = 2
    ERR_UNAVAILABLE = 3
    ERR_TIMEOUT = 4
    ERR_REJECTED = 5
    ERR_SERVER = 6
    ERR_PROTOCOL = 7
    PENDING = 8
    COMPILE_FAILED = 9
    BUSY = 10


class KcacheError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"kcache: {message or 'error'} (status {status})")
        self.status = status


class Buffer(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_uint8)), ("size", ctypes.c_size_t)]


class Options(ctypes.Structure):
    _fields_ = [
        ("url", ctypes.c_char_p),
        ("token", ctypes.c_char_p),
        ("timeout_ms", ctypes.c_int32),
        ("retries", ctypes.c_int32),
    ]


class OptionsExt(ctypes.Structure):
    """kcache_options_ext (ABI 6): struct_size first; NULL fields fall back to their env vars."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("ca_file", ctypes.c_char_p),
        ("client_cert_file", ctypes.c_char_p),
        ("client_key_file", ctypes.c_char_p),
        ("trusted_keys", ctypes.c_char_p),  # ':'-separated PEM files/dirs; NULL: $KCACHE_TRUSTED_KEYS
        ("verify_signatures", ctypes.c_int32),  # 1 on, -1 off, 0: $KCACHE_VERIFY_SIGNATURES
    ]


_client = ctypes.c_void_p
_str = ctypes.c_char_p
_i32 = ctypes.c_int32
_size = ctypes.c_size_t
_buf = ctypes.POINTER(Buffer)
_status = ctypes.c_int

# name: (argument types, result type), as declared in client/include/kcache/kcache.h.
PROTOTYPES: dict[str, tuple[list, object]] = {
    "kcache_abi_version": ([], ctypes.c_int),
    "kcache_client_open": ([ctypes.POINTER(Options), ctypes.POINTER(_client)], _status),
    "kcache_client_open_ext": (
        [ctypes.POINTER(Options), ctypes.POINTER(OptionsExt), ctypes.POINTER(_client)],
        _status,
    ),
    "kcache_client_close": ([_client], None),
    "kcache_last_error": ([], _str),
    "kcache_get": ([_client, _str, _buf], _status),
    "kcache_get_wait": ([_client, _str, _i32, _buf], _status),
    "kcache_put": ([_client, _str, _str, _size], _status),
    "kcache_exists": ([_client, _str], _status),
    "kcache_batch_get": ([_client, ctypes.POINTER(_str), _size, _buf, ctypes.POINTER(ctypes.c_int)], _status),
    "kcache_stats": ([_client, _buf], _status),
    "kcache_run_report_put": ([_client, _str, _str, _str, _str], _status),
    "kcache_runs": ([_client, _str, _i32, _buf], _status),
    "kcache_run": ([_client, _str, _str, _buf], _status),
    "kcache_submit": ([_client, _str, _str, _i32, _buf], _status),
    "kcache_submit_manifest": ([_client, _str, _str, _str, _i32, _buf], _status),
    "kcache_job_wait": ([_client, _str, _i32, _buf], _status),
    "kcache_get_or_compile": ([_client, _str, _str, _i32, _i32, _buf, _buf], _status),
    "kcache_lease_acquire": ([_client, _str, _i32, _str, _buf, _buf], _status),
    "kcache_lease_renew": ([_client, _str, _str, _i32], _status),
    "kcache_lease_release": ([_client, _str, _str], _status),
    "kcache_put_record": ([_client, _str, _str, _str, _size], _status),
    "kcache_get_record": ([_client, _str, _i32, _buf, _buf], _status),
    "kcache_pack_headers": ([_str, ctypes.POINTER(_str), _size, _buf], _status),
    "kcache_verification_stats": ([_client, _buf], _status),
    "kcache_buffer_free": ([_buf], None),
}

_lib = None
_lib_lock = threading.Lock()


def _candidates() -> Iterable[Path]:
    env = os.environ.get("KCACHE_LIBRARY")
    if env:
        yield Path(env)
    here = Path(__file__).resolve().parent
    yield here / "libkcache.so"
    repo = here.parents[2]  # client/python/kcache -> repo root
    for build in ("build/release", "build/asan", "build"):
        yield repo / build / "client" / "libkcache.so"
    yield Path("libkcache.so.1")  # the system's loader path


def _open() -> ctypes.CDLL:
    errors = []
    for path in _candidates():
        if path.is_absolute() and not path.exists():
            continue
        try:
            return ctypes.CDLL(str(path))
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise KcacheError(Status.ERR_INVALID, "libkcache not found; set KCACHE_LIBRARY. " + "; ".join(errors))


def load_library() -> ctypes.CDLL:
    """Loads libkcache once; $KCACHE_LIBRARY overrides where it is found."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = _open()
        version = lib.kcache_abi_version()
        if version < ABI_VERSION:
            raise KcacheError(Status.ERR_INVALID, f"libkcache ABI {version}, need {ABI_VERSION}")
        for name, (argtypes, restype) in PROTOTYPES.items():
            function = getattr(lib, name)
            function.argtypes = argtypes
            function.restype = restype
        _lib = lib
        return lib


def take(lib, buf: Buffer) -> bytes:
    """The buffer's bytes; frees what libkcache allocated."""
    try:
        return ctypes.string_at(buf.data, buf.size) if buf.size else b""
    finally:
        lib.kcache_buffer_free(ctypes.byref(buf))


def last_error(lib) -> str:
    return lib.kcache_last_error().decode(errors="replace")
