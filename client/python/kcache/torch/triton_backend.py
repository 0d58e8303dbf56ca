"""kcache as Triton's remote cache.

Triton builds its cache manager (TRITON_CACHE_MANAGER) and the manager's
backend (TRITON_REMOTE_CACHE_BACKEND) itself, by name, in every process that
compiles kernels, Inductor's compile workers included; the settings come from
the environment enable() exported.
"""

from __future__ import annotations

import json
from typing import Optional

from triton.runtime.cache import RemoteCacheBackend, RemoteCacheManager

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


class KcacheCacheManager(RemoteCacheManager):
    """Triton's RemoteCacheManager, with two fixes for sharing a node's cache dir.

    - Group files: Triton 3.6's RemoteCacheManager materializes its remote
      group file (a list of names) where FileCacheManager expects
      {"child_paths": {name: path}}, so any later process without the remote
      cache fails on that dir. Here the remote keeps the names (paths are
      node-local) and the local dir gets FileCacheManager's format.
    - Local first: what this node materialized before is read from disk,
      without a round trip per file.
    """

    def get_file(self, filename: str) -> Optional[str]:
        if not (self._dump or self._override):
            if (path := self._file_cache_manager.get_file(filename)) is not None:
                return path
        return super().get_file(filename)

    def get_group(self, filename: str) -> Optional[dict[str, str]]:
        if self._dump or self._override:
            return super().get_group(filename)
        local = self._file_cache_manager.get_group(filename)
        if local:
            return local
        group_name = f"__grp__{filename}"
        found = self._backend.get([group_name])
        if group_name not in found:
            return None
        try:
            names = json.loads(found[group_name]).get("child_paths")
        except (ValueError, AttributeError):
            return None
        names = sorted(names) if isinstance(names, (list, dict)) else None
        if not names:
            return None
        children = self._backend.get(names)
        if len(children) != len(names):
            return None  # part of the group is gone: a miss, Triton compiles
        result = {name: self._materialize(name, data) for name, data in children.items()}
        self._file_cache_manager.put_group(filename, result)
        return result

    def put_group(self, filename: str, group: dict[str, str]):
        if self._dump or self._override:
            return super().put_group(filename, group)
        self._backend.put(f"__grp__{filename}", json.dumps({"child_paths": sorted(group)}).encode())
        return self._file_cache_manager.put_group(filename, group)
