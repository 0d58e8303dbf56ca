"""Prefetched FX-graph and AOTAutograd entries, written where Inductor looks first.

On a remote hit Inductor decodes JSON and base64, unpickles, and then writes the
pickle to its local cache dir (_write_to_local_cache), where a warm node finds
it. The stored value of such an entry is that pickle (see _values), so a
prefetched entry is written there before Inductor asks: a fresh node then takes
a warm node's path (no round trip, no JSON, no base64) and a file Inductor
cannot load is skipped by Inductor itself, which then asks the remote cache.
"""

from __future__ import annotations

import importlib
from typing import Callable, Mapping

from . import _keys, _values

# Inductor's remote cache ids -> the class whose local cache holds that entry.
_CACHES = {
    "fx-graph-v1": ("torch._inductor.codecache", "FxGraphCache"),
    "autograd-experimental": ("torch._functorch._aot_autograd.autograd_cache", "AOTAutogradCache"),
}


def writer() -> Callable[[str, bytes, Mapping[str, str]], bool]:
    """write(kcache key, value, metadata) -> whether it went to the local cache.
    Resolved here, in the thread that puts kcache's hooks into Inductor (see
    enable()): the prefetch thread must not import torch modules while the
    trainer imports its own."""
    writers = {}
    for cache_id, (module, name) in _CACHES.items():
        try:
            writers[cache_id] = getattr(importlib.import_module(module), name)._write_to_local_cache
        except (ImportError, AttributeError):
            continue  # another torch: the remote path still serves these entries

    def write(key: str, value: bytes, metadata: Mapping[str, str]) -> bool:
        if not _values.is_packed(metadata):
            return False
        parts = key.split(":", 2)  # torch:{namespace}:{Inductor's remote key}
        if len(parts) != 3 or parts[0] != "torch":
            return False
        cache_id, inductor_key = _keys.split_inductor_key(parts[2])
        local_write = writers.get(cache_id or "")
        if local_write is None:
            return False
        local_write(inductor_key, value)
        return True

    return write
