"""KCACHE_TORCH=1: kcache as torch.compile's remote cache with no code change.

kcache_torch_autoenable.pth (installed beside this module in site-packages)
imports this only when KCACHE_TORCH is set to 1/true/yes/on, and install()
only puts a finder on sys.meta_path: nothing of torch or kcache is imported
at start-up. When the program imports torch, torch.compile is wrapped; the
first call enables kcache from the environment (kcache.torch.run's
enable_from_env), then compiles.

Why at the first torch.compile and not as soon as torch is imported:
processes that import torch but never compile (DataLoader workers, Inductor's
own compile workers, tools) open no session and import no Inductor module;
and no kcache code runs inside torch's import, where an error would surface
as a failed `import torch`. The first torch.compile still comes before any
graph is compiled and before Inductor starts its compile workers, which
inherit what enable() exports. python -m kcache.torch.run installs the same
hook before it runs the script.

Nothing here may stop the interpreter: every error is a WARNING on logger
"kcache" and torch.compile runs as without kcache.
"""

from __future__ import annotations

import functools
import importlib.abc
import sys
import threading

_lock = threading.Lock()
_enabled = False
_dispatching = threading.local()


def install() -> None:
    try:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "compile"):
            _wrap_compile(torch)
        elif not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _TorchFinder())
    except Exception as e:  # noqa: BLE001
        _warn(e)


def _warn(error: BaseException) -> None:
    import logging

    logging.getLogger("kcache").warning(
        "kcache: KCACHE_TORCH=1 but the switch failed (%s: %s); torch.compile runs without kcache",
        type(error).__name__,
        error,
    )


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for `torch`, wraps the real loader so that
    torch.compile is wrapped once torch's module has run."""

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]  # once is enough
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)  # torch's own errors stay torch's
        # torch's module is as its loader left it; only the wrapper remains.
        module.__loader__ = self._inner
        if module.__spec__ is not None:
            module.__spec__.loader = self._inner
        try:
            _wrap_compile(module)
        except Exception as e:  # noqa: BLE001
            _warn(e)

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self._inner, name)


def _wrap_compile(torch) -> None:
    original = torch.compile
    if getattr(original, "_kcache_autoenable", False):
        return

    @functools.wraps(original)
    def compile(*args, **kwargs):
        _enable_once()
        # enable() may wrap torch.compile itself (KCACHE_TORCH_BUNDLES=1: the
        # first call must load the bundle); go through that wrapper once, and
        # when it calls back here, to torch's own.
        current = torch.compile
        if getattr(current, "_kcache_bundles", False) and not getattr(_dispatching, "active", False):
            _dispatching.active = True
            try:
                return current(*args, **kwargs)
            finally:
                _dispatching.active = False
        return original(*args, **kwargs)

    compile._kcache_autoenable = True
    torch.compile = compile


def _enable_once() -> None:
    global _enabled
    with _lock:
        if _enabled:
            return
        _enabled = True
        try:
            already = sys.modules.get("kcache.torch")
            if already is not None and getattr(already, "_session", None) is not None:
                return  # the program (or kcache.torch.run) enabled it itself: its settings stand
            from kcache.torch._from_env import enable_from_env

            enable_from_env()
        except Exception as e:  # noqa: BLE001  (enable_from_env fails open itself; this is its import)
            _warn(e)
