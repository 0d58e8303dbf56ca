"""Which bundled functions serve the run's calls.

Each compiled function a loaded package installs reports its first call and
is then put back (the hot path stays PyTorch's own); a frame Dynamo converts
although its code holds precompile entries is a miss of that function. The
Bundles object judges the run at exit (see _bundles).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ._bundles import Bundles

logger = logging.getLogger("kcache")


def note_first_backend_calls(package: Any, bundles: Bundles) -> None:
    """Each compiled function (backend) the package installed as a module
    global tells bundles when it first runs (Dynamo's code for an entry whose
    guards passed calls it by name), then puts the installed one back."""
    if not bundles.watching_calls:
        return
    functions = {
        backend_id: code_key(code)
        for code, entry in package._codes.items()
        if not entry.bypassed
        for backend_id in entry.backend_ids
    }
    bundles.judge(functions.values())
    for module, names in package._installed_globals.items():
        for name in set(names) & functions.keys():
            installed = module.__dict__.get(name)
            if installed is not None:
                module.__dict__[name] = served_note(module, name, installed, functions[name], bundles)


def code_key(code: Any) -> tuple:
    """A bundled function as both its package entry and Dynamo's frame name it.
    Not by file: a package's codes carry the saving node's paths. Two
    functions that share a key count as one, which can only keep a bundle."""
    return (getattr(code, "co_qualname", code.co_name), code.co_firstlineno)


def served_note(module: Any, name: str, installed: Callable, function: tuple, bundles: Bundles) -> Callable:
    """installed, which at its first call tells bundles and takes its place
    back in the module (unless something else was installed there since)."""
    import torch

    def first_call(*args, **kwargs):
        if module.__dict__.get(name) is note:
            module.__dict__[name] = installed
        bundles.served(function)
        return installed(*args, **kwargs)

    # Disabled as PyTorch's own installed backend is: Dynamo must not trace it.
    note = torch._dynamo.disable(first_call)
    return note


def watch_bundled_calls(bundles: Bundles) -> Callable[[], None]:
    """Dynamo converts a frame only when no cache or precompile entry of its
    code passed its guards: a code with precompile entries converted is a
    miss of that bundled function (Bundles.missed). Fails open: a watch that
    raises is a bundle kept, never an error in the trainer."""
    from torch._C._dynamo.eval_frame import _debug_get_precompile_entries
    from torch._dynamo import convert_frame

    cls = convert_frame.ConvertFrameAssert
    original = cls.__call__

    @functools.wraps(original)
    def call(self, frame, *args, **kwargs):
        if bundles.watching_calls:
            try:
                function = code_key(frame.f_code)
                # The reason once per function: it evaluates every guard.
                if bundles.needs_judging(function) and (entries := _debug_get_precompile_entries(frame.f_code)):
                    bundles.missed(function, _first_guard_failure(entries[0], frame))
            except Exception as e:  # noqa: BLE001 - fail open
                logger.debug("kcache: cannot judge a bundled call: %s", e)
        return original(self, frame, *args, **kwargs)

    cls.__call__ = call
    return lambda: setattr(cls, "__call__", original)


def _first_guard_failure(entry: Any, frame: Any) -> str:
    """The first failing guard of a precompile entry, for the log and the marker."""
    try:
        parts = entry.guard_manager.check_verbose(frame.f_locals).verbose_code_parts
        return str(parts[0])[:200] if parts else "unknown"
    except Exception as e:  # noqa: BLE001 - a reason is an aid, not a result
        return f"unknown ({type(e).__name__})"
