"""kcache as the backend of Triton's RemoteCacheManager.

Triton builds the backend itself, from TRITON_REMOTE_CACHE_BACKEND
("kcache.torch.triton_backend:KcacheTritonBackend"), in every process that
compiles kernels, Inductor's compile workers included; the settings come from
the environment enable() exported.
"""

from __future__ import annotations

from triton.runtime.cache import RemoteCacheBackend

from . import _keys
from ._session import session_from_env

_PRODUCER = "kcache.torch (triton)"


class KcacheTritonBackend(RemoteCacheBackend):
    def __init__(self, key: str):
        super().__init__(key)
        self._key = key
        self._session = session_from_env()

    def _entry(self, filename: str) -> str:
        return _keys.triton_entry(self._session.settings.namespace, self._key, filename)

    def get(self, filenames: list[str]) -> dict[str, bytes]:
        values = self._session.batch_get([self._entry(f) for f in filenames])
        found = {f: v for f, v in zip(filenames, values) if v is not None}
        stats = self._session.stats
        stats["triton.hits"] += len(found)
        stats["triton.misses"] += len(filenames) - len(found)
        return found

    def put(self, filename: str, data: bytes) -> None:
        if self._session.put(self._entry(filename), bytes(data), {"triton_key": self._key}, _PRODUCER):
            self._session.stats["triton.puts"] += 1
