"""enable() with every setting from the environment: what the launcher
(python -m kcache.torch.run) and the KCACHE_TORCH=1 switch call.

Settings fields come from their KCACHE_* variables (Settings.ENV); enable()'s
own two switches from KCACHE_TORCH_TRITON and KCACHE_TORCH_BUNDLED_AUTOTUNE.
TLS (KCACHE_CA_FILE, KCACHE_CLIENT_CERT, KCACHE_CLIENT_KEY) is read by
libkcache itself.
"""

from __future__ import annotations

import os
from typing import Optional

from ._session import Session, _flag

SWITCHES = {"triton": ("KCACHE_TORCH_TRITON", True), "bundled_autotune": ("KCACHE_TORCH_BUNDLED_AUTOTUNE", False)}


def switches() -> dict[str, bool]:
    out = {}
    for argument, (var, default) in SWITCHES.items():
        raw = os.environ.get(var, "")
        out[argument] = _flag(var, raw) if raw.strip() else default
    return out


def enable_from_env() -> Optional[Session]:
    """enable() from the environment, failing open: on any error (a bad
    variable, no libkcache, verification without a key) a WARNING on logger
    "kcache" and None; the trainer runs without the remote cache."""
    import logging

    from kcache._failopen import _who

    try:
        from . import enable

        # Called at the first torch.compile (the KCACHE_TORCH=1 hook) or just
        # before one (kcache.torch.compile): the hooks go in now.
        return enable(**switches(), defer_hooks=False)
    except Exception as e:  # noqa: BLE001  (fail open: nothing here may stop a trainer)
        logging.getLogger("kcache").warning(
            "%s: not enabled for torch.compile (%s: %s); it runs without the remote cache",
            _who(),
            type(e).__name__,
            e,
        )
        return None
