"""Inductor's hash details, kept with each FX-graph and AOTAutograd entry.

Inductor computes a key from many inputs (the graph, example inputs' metadata,
configs, versions) and logs one "[hash] field: value" line per input at debug
level. It hands the remote cache only the key, so the recorder wraps the two
functions that compute keys and remembers the lines of recent keys until the
entry is put; `kcache explain A B` then names the inputs that differ.
"""

from __future__ import annotations

import collections
import functools
import threading
from typing import Any, Callable, Optional

# Keys computed but not (yet) put: bounded, a miss that is never put is forgotten.
_CAPACITY = 4096

# (module, function) pairs returning (key, debug_lines).
_KEY_FUNCTIONS = (
    ("torch._inductor.codecache", "compiled_fx_graph_hash"),
    ("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key"),
)


class HashDetailsRecorder:
    def __init__(self, capacity: int = _CAPACITY):
        self._capacity = capacity
        self._lines: collections.OrderedDict[str, list[str]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._originals: list[tuple[Any, str, Callable]] = []

    def record(self, key: str, lines: list[str]) -> None:
        with self._lock:
            self._lines[key] = list(lines)
            self._lines.move_to_end(key)
            while len(self._lines) > self._capacity:
                self._lines.popitem(last=False)

    def lines(self, key: str) -> Optional[list[str]]:
        with self._lock:
            return self._lines.get(key)

    def install(self) -> None:
        """Wraps Inductor's key functions; idempotent."""
        import importlib

        if self._originals:
            return
        for module_name, name in _KEY_FUNCTIONS:
            module = importlib.import_module(module_name)
            original = getattr(module, name)
            setattr(module, name, self._wrap(original))
            self._originals.append((module, name, original))

    def uninstall(self) -> None:
        for module, name, original in reversed(self._originals):
            setattr(module, name, original)
        self._originals.clear()

    def _wrap(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def key_with_details(*args, **kwargs):
            key, lines = original(*args, **kwargs)
            self.record(key, lines)
            return key, lines

        return key_with_details
