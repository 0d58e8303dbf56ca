"""Keeps coordinate-descent results found by an earlier run.

With coordinate_descent_tuning on (every max-autotune mode), Inductor tunes
each Triton kernel at its first launch unless the kernel's config is marked
`found_by_coordesc`. Its autotune cache keeps the tuned config, so a later
process should not tune again. In torch 2.11 with Triton 3.6 two gaps make it
tune again anyway, on a warm node as on a fresh one:

- Triton's Config.__setstate__ keeps only its own fields, so the mark is lost
  whenever a config is unpickled: a compile worker's result, a statically
  launchable kernel in an FX-graph entry, a kernel in a Mega-Cache bundle.
- CachingAutotuner.recheck_autotune_cache (the load of a statically
  launchable kernel) applies a cached best config only to a kernel compiled
  with more than one config, and never carries the mark over to the compile
  result it keeps. Most pointwise and reduction kernels have one.

install() closes both, only where the installed versions have them. A kept
config is the one the same kernel (same source, same configs, same torch and
Triton: the autotune cache's key) was tuned to, as Inductor would use it in
the process that tuned it; it changes which launch config runs, never what a
kernel computes.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any, Callable

_log = logging.getLogger("kcache")

_MARK = "found_by_coordesc"


def install() -> Callable[[], None]:
    """Puts both fixes in where they are needed; returns the undo. A fix that
    cannot go in is left out: kernels are then tuned again, as without kcache."""
    undos = []
    for fix in (_keep_mark_when_unpickled, _apply_cached_best_on_load):
        try:
            undos.append(fix())
        except Exception as e:  # noqa: BLE001 - a torch or Triton without these internals
            _log.debug("kcache: %s left out (%s: %s)", fix.__name__, type(e).__name__, e)

    def undo() -> None:
        for one in reversed(undos):
            one()

    return undo


def _keep_mark_when_unpickled() -> Callable[[], None]:
    from torch._inductor.runtime.triton_compat import Config

    if not _loses_mark(Config):
        return lambda: None
    original = Config.__setstate__

    def __setstate__(self, state):
        original(self, state)
        if state.get(_MARK):
            setattr(self, _MARK, True)

    return _replace(Config, "__setstate__", __setstate__)


def _loses_mark(config_class: Any) -> bool:
    config = config_class({"XBLOCK": 1})
    setattr(config, _MARK, True)
    return not getattr(pickle.loads(pickle.dumps(config)), _MARK, False)


def _apply_cached_best_on_load() -> Callable[[], None]:
    from torch._inductor.runtime import triton_heuristics

    autotuner = triton_heuristics.CachingAutotuner
    original = getattr(autotuner, "recheck_autotune_cache", None)
    if original is None or not _skips_single_configs(original):
        return lambda: None

    def recheck_autotune_cache(self, reload_kernel_from_src):
        if not self.inductor_meta.get("coordinate_descent_tuning"):
            return original(self, reload_kernel_from_src)
        try:
            _recheck(self, reload_kernel_from_src, triton_heuristics)
        except Exception as e:  # noqa: BLE001 - at worst the kernel is tuned again
            _log.debug("kcache: cached coordinate-descent config not applied (%s: %s)", type(e).__name__, e)

    return _replace(autotuner, "recheck_autotune_cache", recheck_autotune_cache)


def _replace(owner: Any, name: str, ours: Callable) -> Callable[[], None]:
    """Sets owner.name to ours; the undo puts the original back unless
    someone replaced ours since."""
    original = owner.__dict__[name]
    setattr(owner, name, ours)

    def undo() -> None:
        if owner.__dict__.get(name) is ours:
            setattr(owner, name, original)

    return undo


def _skips_single_configs(method: Callable) -> bool:
    """Whether this torch's recheck has the gap (read from its source: a
    fixed torch keeps its own)."""
    import inspect

    try:
        source = inspect.getsource(method)
    except (OSError, TypeError):
        return False
    return "len(configs) > 1" in source


def _recheck(self, reload_kernel_from_src, triton_heuristics) -> None:
    """recheck_autotune_cache for a kernel tuned by coordinate descent: the
    cached best config, marked, for one compile result as for many."""
    from torch._inductor.runtime.runtime_utils import triton_config_to_hashable

    configs = [result.config for result in self.compile_results]
    if len(configs) == 1 and getattr(configs[0], _MARK, False):
        return  # unpickled with its mark: the tuned config itself (a bundle's kernel)
    cached, _, info = triton_heuristics.check_autotune_cache(configs, self.filename, self.inductor_meta)
    self.autotune_cache_info = info
    if info.get("autotune_cache_state") != "hit" or len(cached) != 1:
        return
    best = cached[0]
    tuned = getattr(best, _MARK, False)
    wanted = triton_config_to_hashable(best)
    for result in self.compile_results:
        if triton_config_to_hashable(result.config) == wanted:
            self.compile_results = [result]
            if tuned:
                setattr(result.config, _MARK, True)
            return
    if tuned:  # tuned to a config none of the compiled ones has: compile it, as Inductor does for many
        if self.fn.fn is None:
            self.fn = reload_kernel_from_src().fn
        self.compile_results = [self._precompile_config(best)]
