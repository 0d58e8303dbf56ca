"""kcache: the Python client of kcached, over libkcache's C ABI (ctypes).

One build of libkcache serves every CPython: nothing here is compiled.

    import kcache
    client = kcache.Client("http://127.0.0.1:7070")
    client.put("my-key", b"bytes")
    client.get("my-key")          # b"bytes", or None on a miss

Fail open: by default every error (daemon down, timeout, refusal) is a miss,
counted in ``client.errors`` with the message in ``client.last_error``; a
trainer never sees an exception or waits past the timeout. ``fail_open=False``
raises ``KcacheError`` instead (tools, tests).
"""

from __future__ import annotations

import ctypes
import json
import os
from typing import Sequence

from ._client import Client, Compiled
from ._native import ABI_VERSION, Buffer, KcacheError, Status, last_error, load_library, take

__all__ = ["ABI_VERSION", "Client", "Compiled", "KcacheError", "load_library", "pack_headers", "Status"]


def pack_headers(spec, include_dirs: Sequence[str] = ()) -> dict:
    """The compile spec with the headers it includes from this machine packed in.

    kcached refuses specs whose options name host paths (``-I DIR``,
    ``-isystem``...) or that include absolute or ".." paths. This searches the
    spec's own include dirs (and removes them from "options"), then
    ``include_dirs``, as the compiler would, and adds every header found to
    "headers" under the name it is included by; includes found nowhere are
    left to the toolchain. ``spec`` is a dict or JSON text. Raises KcacheError
    (two files under one name, a ".." include, an unreadable file, limits).
    """
    lib = load_library()
    text = (spec if isinstance(spec, str) else json.dumps(spec)).encode()
    if isinstance(include_dirs, (str, bytes, os.PathLike)):
        include_dirs = [include_dirs]  # one dir, not its characters
    dirs = [os.fsencode(d) for d in include_dirs]
    c_dirs = (ctypes.c_char_p * len(dirs))(*dirs)
    buf = Buffer()
    status = lib.kcache_pack_headers(text, c_dirs, len(dirs), ctypes.byref(buf))
    if status != Status.OK:
        raise KcacheError(status, last_error(lib))
    return json.loads(take(lib, buf))
