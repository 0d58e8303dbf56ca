"""Starts Inductor's compile-worker pool when a graph compiles, not before.

Inductor starts its pool (a sidecar process and one worker per core, each
importing torch and Triton: 4-5 CPU-seconds on a 16-core host) before it
knows whether any graph will compile: compile_fx wakes it as soon as it sees
CUDA inputs (the "inductor" backend called by name warms it too), and
loading a compiled graph from a cache creates it (each Triton kernel of the
loaded module asks AsyncCompile.use_process_pool). Through kcache most
processes compile nothing: a warm or fresh node hits every AOTAutograd and
FX-graph entry, and a rank of a cold job waits for the rank that compiles.

install() holds the pool back until a graph compiles: an AOTAutograd lookup
that misses (the earliest sign, before AOTAutograd traces the joint graph)
or Inductor's codegen of a graph (an FX-graph miss, or a graph whose cache
entry Inductor bypasses). Until then use_process_pool() answers False, as
Inductor does while its pool starts, so a kernel is loaded in the process.
From then on Inductor's own warm-up runs, and its pool is used as without
kcache.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Optional


class DeferredPool:
    """Whether a graph compiled yet, and Inductor's warm-up, run once both it
    was asked for and a graph compiles."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warm: Optional[Callable[[], None]] = None  # the warm-up asked for first
        self._needed = self._started = False

    def asked(self, warm: Callable[[], None]) -> None:
        with self._lock:
            self._warm = self._warm or warm
        self._start_if_due()

    def need(self) -> None:
        with self._lock:
            self._needed = True
        self._start_if_due()

    @property
    def needed(self) -> bool:
        """A graph compiles in this process: Inductor's pool as without kcache."""
        return self._needed

    @property
    def started(self) -> bool:
        """The warm-up Inductor asked for has run."""
        return self._started

    def _start_if_due(self) -> None:
        with self._lock:
            warm = self._warm if self._needed and not self._started else None
            self._started = self._started or warm is not None
        if warm is not None:
            warm()


def install() -> tuple[DeferredPool, Callable[[], None]]:
    """Defers Inductor's pool to the first graph that compiles; returns the
    pool and the undo."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import async_compile, compile_fx

    pool = DeferredPool()
    compiler = async_compile.AsyncCompile
    originals = {name: compiler.__dict__[name] for name in ("wakeup", "use_process_pool")}  # classmethod objects
    original_warm = async_compile.maybe_warm_pool
    original_codegen = compile_fx.fx_codegen_and_compile

    def wakeup(cls) -> None:
        pool.asked(originals["wakeup"].__get__(None, cls))

    def use_process_pool(cls) -> bool:
        return pool.needed and originals["use_process_pool"].__get__(None, cls)()

    # torch._dynamo.backends.inductor imports maybe_warm_pool at each call.
    @functools.wraps(original_warm)
    def maybe_warm_pool() -> None:
        pool.asked(original_warm)

    @functools.wraps(original_codegen)
    def fx_codegen_and_compile(*args, **kwargs):
        pool.need()
        return original_codegen(*args, **kwargs)

    ours = {"wakeup": wakeup, "use_process_pool": use_process_pool}
    for name, function in ours.items():
        setattr(compiler, name, classmethod(function))
    async_compile.maybe_warm_pool = maybe_warm_pool
    compile_fx.fx_codegen_and_compile = fx_codegen_and_compile
    # AOTAutogradCache._lookup -> entry or None.
    undo_aot = _on_miss(AOTAutogradCache, "_lookup", lambda result: result is None, pool.need)

    def undo() -> None:
        undo_aot()
        if compile_fx.fx_codegen_and_compile is fx_codegen_and_compile:
            compile_fx.fx_codegen_and_compile = original_codegen
        if async_compile.maybe_warm_pool is maybe_warm_pool:
            async_compile.maybe_warm_pool = original_warm
        for name, function in ours.items():
            if getattr(compiler.__dict__.get(name), "__func__", None) is function:
                setattr(compiler, name, originals[name])

    return pool, undo


def _on_miss(cls: type, name: str, missed: Callable[[Any], bool], on_miss: Callable[[], None]) -> Callable[[], None]:
    """Wraps the static lookup cls.name to call on_miss() when it misses."""
    original = cls.__dict__[name]  # the staticmethod object, put back as it was
    function = original.__func__

    @functools.wraps(function)
    def lookup(*args, **kwargs):
        result = function(*args, **kwargs)
        if missed(result):
            on_miss()
        return result

    setattr(cls, name, staticmethod(lookup))

    def undo() -> None:
        if cls.__dict__.get(name) is not None and cls.__dict__[name].__func__ is lookup:
            setattr(cls, name, original)

    return undo
