"""Starts Inductor's compile-worker pool when a graph compiles, not before.

Inductor wakes its pool (a sidecar process and one worker per core, each
importing torch and Triton: 4-5 CPU-seconds on a 16-core host) as soon as
compile_fx sees CUDA inputs (AsyncCompile.wakeup; the "inductor" backend
called by name warms it too: maybe_warm_pool), before it knows whether any
graph will compile. Through kcache most processes compile nothing: a warm or
fresh node hits every AOTAutograd and FX-graph entry, and a rank of a cold
job waits for the rank that compiles. install() holds the warm-up back until
an AOTAutograd or FX-graph lookup misses (whatever made it miss: an empty
cache, a bundle's saving run, the wait for another rank given up); the pool
then starts at once, early in that compile, as Inductor would have started it.

A kernel Inductor compiles without such a miss (a graph whose cache entry it
bypasses) still finds a pool: Inductor starts one on first use and compiles
in the process until it is ready.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional


class DeferredPool:
    """Inductor's warm-up, run once both it was asked for and a graph
    compiles (a miss)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warm: Optional[Callable[[], None]] = None  # the warm-up asked for first
        self._needed = self._started = False

    def asked(self, warm: Callable[[], None]) -> None:
        with self._lock:
            self._warm = self._warm or warm
        self._start_if_due()

    def needed(self) -> None:
        with self._lock:
            self._needed = True
        self._start_if_due()

    @property
    def started(self) -> bool:
        return self._started

    def _start_if_due(self) -> None:
        with self._lock:
            warm = self._warm if self._needed and not self._started else None
            self._started = self._started or warm is not None
        if warm is not None:
            warm()


def install() -> tuple[DeferredPool, Callable[[], None]]:
    """Defers Inductor's pool warm-up to the first AOTAutograd or FX-graph
    miss; returns the pool and the undo."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import async_compile
    from torch._inductor.codecache import FxGraphCache

    pool = DeferredPool()
    compiler = async_compile.AsyncCompile
    original_wakeup = compiler.__dict__["wakeup"]  # the classmethod object, put back as it was
    original_warm = async_compile.maybe_warm_pool

    def wakeup(cls) -> None:
        pool.asked(original_wakeup.__get__(None, cls))

    # torch._dynamo.backends.inductor imports maybe_warm_pool at each call.
    @functools.wraps(original_warm)
    def maybe_warm_pool() -> None:
        pool.asked(original_warm)

    compiler.wakeup = classmethod(wakeup)
    async_compile.maybe_warm_pool = maybe_warm_pool
    # AOTAutogradCache._lookup -> entry or None; FxGraphCache._lookup_graph -> (graph or None, info).
    undo_aot = _on_miss(AOTAutogradCache, "_lookup", lambda result: result is None, pool.needed)
    undo_fx = _on_miss(FxGraphCache, "_lookup_graph", lambda result: result[0] is None, pool.needed)

    def undo() -> None:
        undo_fx()
        undo_aot()
        if async_compile.maybe_warm_pool is maybe_warm_pool:
            async_compile.maybe_warm_pool = original_warm
        if getattr(compiler.__dict__.get("wakeup"), "__func__", None) is wakeup:
            compiler.wakeup = original_wakeup

    return pool, undo


def _on_miss(cls: type, name: str, missed: Callable[[Any], bool], needed: Callable[[], None]) -> Callable[[], None]:
    """Wraps the static lookup cls.name to call needed() when it misses."""
    original = cls.__dict__[name]  # the staticmethod object, put back as it was
    function = original.__func__

    @functools.wraps(function)
    def lookup(*args, **kwargs):
        result = function(*args, **kwargs)
        if missed(result):
            needed()
        return result

    setattr(cls, name, staticmethod(lookup))

    def undo() -> None:
        if cls.__dict__.get(name) is not None and cls.__dict__[name].__func__ is lookup:
            setattr(cls, name, original)

    return undo
