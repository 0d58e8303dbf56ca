"""kcache in Inductor's compile workers.

Inductor compiles Triton kernels in worker processes it starts itself
(python -m torch._inductor.compile_worker --pickler=MODULE.CLASS ...). A
kernel's autotune cache is created there, and its remote part is kept only if
the worker could create it: with backend_override_cls set in the trainer
alone, a worker gets no remote autotune cache, and a fresh node re-benchmarks
every kernel's configs. Naming this module's pickler makes each worker import
it, which installs kcache's backends there from the environment enable()
exported.
"""

from __future__ import annotations

import sys
from typing import Callable

from torch._inductor.compile_worker import subproc_pool


class KcacheSubprocPickler(subproc_pool.SubprocPickler):
    """Inductor's pickler, unchanged: its module name is what travels."""


def use_in_compile_workers() -> Callable[[], None]:
    """Compile worker pools started from now on install kcache; returns the undo."""
    original = subproc_pool.SubprocPickler
    subproc_pool.SubprocPickler = KcacheSubprocPickler

    def undo() -> None:
        subproc_pool.SubprocPickler = original

    return undo


def _in_compile_worker() -> bool:
    return any(arg == f"--pickler={__name__}.{KcacheSubprocPickler.__name__}" for arg in sys.argv)


if _in_compile_worker():
    from . import inductor_backend
    from ._session import session_from_env

    inductor_backend.install(session_from_env())
