"""Starts Inductor's compile-worker pool when a graph compiles, not before.

Inductor starts its pool (a sidecar process and one worker per core, each
importing torch and Triton: 4-5 CPU-seconds on a 16-core host) before it
knows whether any graph will compile: compile_fx wakes it as soon as it sees
CUDA inputs (the "inductor" backend called by name warms it too), and
loading a compiled graph from a cache creates it (each Triton kernel of the
loaded module asks AsyncCompile.use_process_pool). Through kcache most
processes compile nothing: a warm or fresh node hits every AOTAutograd and
FX-graph entry, and a rank of a cold job waits for the rank that compiles.

install() holds the pool back until a graph compiles: AOTAutograd's cache
answering no compiled graph (a miss or a bypass: the earliest sign, before
AOTAutograd traces the joint graph) or Inductor's codegen of a graph (an
FX-graph miss, or a graph whose entry Inductor bypasses). Until then use_process_pool() answers False, as
Inductor does while its pool starts, so a kernel is loaded in the process.
From then on Inductor's own warm-up runs, and its pool is used as without
kcache.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable, Optional

_log = logging.getLogger("kcache")


class DeferredPool:
    """Whether a graph compiled yet, and Inductor's warm-up, run once both it
    was asked for and a graph compiles. A process whose pool already runs
    (kcache enabled after a compile) starts as needed."""

    def __init__(self, needed: bool = False) -> None:
        self._lock = threading.Lock()
        self._warm: Optional[Callable[[], None]] = None  # the warm-up asked for first
        self._needed = self._started = needed

    def asked(self, warm: Callable[[], None]) -> None:
        with self._lock:
            self._warm = self._warm or warm
            started = self._started
        if started:  # as without kcache: a later wake-up brings a quiesced pool back early
            warm()
            return
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
        if warm is None:
            return
        try:
            warm()
        except Exception as e:  # noqa: BLE001 - Inductor starts its pool on first use anyway
            _log.warning("kcache: Inductor's compile-worker warm-up failed (%s: %s)", type(e).__name__, e)


def install() -> tuple[DeferredPool, Callable[[], None]]:
    """Defers Inductor's pool to the first graph that compiles; returns the
    pool and the undo. Every original is read before anything is replaced,
    so a torch without one of them changes nothing (the caller logs it)."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor import async_compile, compile_fx

    compiler = async_compile.AsyncCompile
    originals = {name: compiler.__dict__[name] for name in ("wakeup", "use_process_pool")}  # classmethod objects
    original_warm = async_compile.maybe_warm_pool
    original_codegen = compile_fx.fx_codegen_and_compile
    original_try_load = AOTAutogradCache.__dict__["try_load"]  # staticmethod object
    try_load = original_try_load.__func__
    pool = DeferredPool(needed=bool(async_compile._pool_set))

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

    # try_load -> the compiled graph, or None on a miss or a bypass: AOTAutograd compiles.
    @functools.wraps(try_load)
    def try_load_or_need(*args, **kwargs):
        compiled = try_load(*args, **kwargs)
        if compiled is None:
            pool.need()
        return compiled

    ours = {"wakeup": wakeup, "use_process_pool": use_process_pool}
    for name, function in ours.items():
        setattr(compiler, name, classmethod(function))
    async_compile.maybe_warm_pool = maybe_warm_pool
    compile_fx.fx_codegen_and_compile = fx_codegen_and_compile
    AOTAutogradCache.try_load = staticmethod(try_load_or_need)

    def undo() -> None:
        if getattr(AOTAutogradCache.__dict__.get("try_load"), "__func__", None) is try_load_or_need:
            AOTAutogradCache.try_load = original_try_load
        if compile_fx.fx_codegen_and_compile is fx_codegen_and_compile:
            compile_fx.fx_codegen_and_compile = original_codegen
        if async_compile.maybe_warm_pool is maybe_warm_pool:
            async_compile.maybe_warm_pool = original_warm
        for name, function in ours.items():
            if getattr(compiler.__dict__.get(name), "__func__", None) is function:
                setattr(compiler, name, originals[name])

    return pool, undo
