"""kcache keys for the entries of Inductor's and Triton's caches.

kcached accepts 1-512 characters of [A-Za-z0-9._:+=-]. Inductor's keys
("pt2:fx-graph-v1::f<hash>:c1") and Triton's file names fit and are kept
readable, so `kcache ls --prefix torch:` and `kcache show` mean something; any
other key is hashed.
"""

from __future__ import annotations

import hashlib
import re
from typing import Optional

_VALID = re.compile(r"[A-Za-z0-9._:+=-]{1,512}")
_NAMESPACE = re.compile(r"[A-Za-z0-9._-]{1,64}")
# RedisRemoteCache's format: pt2:{cache_id}::{key}:c{version}
_INDUCTOR_KEY = re.compile(r"pt2:(?P<cache>[^:]+)::(?P<key>.+):c\d+")


def check_namespace(namespace: str) -> str:
    if not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"kcache.torch: namespace {namespace!r} must be 1-64 characters of [A-Za-z0-9._-]")
    return namespace


def _bounded(key: str, prefix: str) -> str:
    if _VALID.fullmatch(key):
        return key
    return f"{prefix}:sha256-{hashlib.sha256(key.encode()).hexdigest()}"


def inductor_entry(namespace: str, inductor_key: str) -> str:
    """The kcache key of one Inductor remote-cache entry."""
    return _bounded(f"torch:{namespace}:{inductor_key}", f"torch:{namespace}")


def triton_entry(namespace: str, triton_key: str, filename: str) -> str:
    """The kcache key of one file of one Triton kernel."""
    return _bounded(f"triton:{namespace}:{triton_key}:{filename}", f"triton:{namespace}")


def manifest_entry(namespace: str, run_fingerprint: str) -> str:
    """The kcache key of a run's manifest (the entries it read and wrote)."""
    return _bounded(f"torch:{namespace}:run-manifest:{run_fingerprint}", f"torch:{namespace}")


def float_specializations_entry(namespace: str, run_fingerprint: str) -> str:
    """The kcache key of the floats a run's frames specialized (see _tensorify)."""
    return _bounded(f"torch:{namespace}:float-specializations:{run_fingerprint}", f"torch:{namespace}")


def bundle_entry(namespace: str, digest: str) -> str:
    """The kcache key of a run's compile bundle (see _bundle_header.bundle_key)."""
    return _bounded(f"torch:{namespace}:compile-bundle:{digest}", f"torch:{namespace}")


def split_inductor_key(remote_key: str) -> tuple[Optional[str], str]:
    """(cache id, Inductor's own key) from a RedisRemoteCache key; the key is
    what Inductor logs and what its hash details are recorded under."""
    m = _INDUCTOR_KEY.fullmatch(remote_key)
    if m is None:
        return None, remote_key
    return m.group("cache"), m.group("key")
