"""Mega-Cache bundles: a fresh process loads a whole compile instead of tracing.

With torch._dynamo.config.caching_precompile, Dynamo records each compiled
function as a precompile entry (its guards, bytecode and compiled backends),
and torch.compiler.save_cache_artifacts() packs those together with the FX
graph, AOTAutograd, autotune and Triton entries into one bundle. A process
that loads it (load_cache_artifacts) before calling a compiled function finds
the precompile entry and skips Dynamo tracing, AOTAutograd and Inductor.

PyTorch finds a precompile entry by the function's qualified name and first
line only, checks Python/torch/CUDA/Triton versions, the GPU name and the
source of inlined functions, and with caching_precompile it drops ID_MATCH
guards, so it would reuse an entry for another module instance, other compile
kwargs or another Inductor config. Hence kcache keys and checks more:

- key: the run fingerprint (as the run manifest's) + the main script's bytes +
  Python, torch, Triton and CUDA versions + every visible GPU's name and
  capability; fetched in the background from enable() on;
- header, compared in full before loading: for every torch.compile call of the
  saving run, the compile kwargs, the model's class and source file bytes, its
  parameters' and buffers' names, shapes, dtypes and devices, its training flag,
  and Inductor's, Dynamo's and functorch's configs at that call.

Where PyTorch packages no compiled function of a run ("Backend not found" at
save: a grad-enabled forward saved before any backward), the run puts a marker
under the bundle's key instead: for a day, a later run compiles each call
whose signature is the marker's at that position without caching_precompile
(which also changes the AOTAutograd entries, so it would miss them), as with
bundles off. A call the marker does not cover compiles with precompile, and
such a run saves again at exit (a bundle, or a new marker); after a day the
next run tries afresh, so one short run (a smoke test, a preempted job) does
not keep bundles off.

A run that saves a bundle compiles the graphs it packages afresh below Dynamo:
its FX-graph and AOTAutograd lookups miss (Triton kernels and autotune
results still come from the caches). PyTorch 2.11 cannot package a GPU graph
that it loaded from the FX-graph cache: pickling the bundled AOTAutograd
entry asserts "pickle should not be called with after make_launchers()", so
the entry's backend is missing at save ("Backend not found") and the package
is useless. A node whose FX graphs came from kcache (or its own disk) would
therefore never save a bundle. Measured on an H100 with PyTorch alone
(scripts/device/precompile_probe.sh --warm-fx). Only the saving process
pays: rank 0 ($RANK unset or 0) of a run that found no bundle; other ranks
neither save nor skip lookups, so they still share compiles through kcache.
A run that cannot save (one function compiled with two settings, or kcached
refusing the bundle) leaves a marker, so the next runs do not pay again.

A loaded bundle with a function whose entries served no call of a whole run
(Dynamo traced it although the bundle has entries for it, and none of its
compiled functions ever ran: a guard that cannot pass after a reload, as with
GPT-2 and dynamic=True on 2.11) is replaced by a marker at exit too: loading
it would cost every later run what it cost this one. A function that missed
a call and served another (a warm-up batch, a new shape) keeps the bundle.
Dynamo's global names move past the bundle's when it loads
(_precompile_fixes.names_after_the_bundle). What the key and header hold is
in _bundle_header, how calls are watched in _bundle_watch, and how PyTorch
2.11's precompile is made to fail open in _precompile_fixes.

A later torch.compile call whose signature differs from the saving run's call
at the same position compiles without precompile (it traces; FX graph and
AOTAutograd entries are keyed by content and stay sound). A bundle PyTorch
refuses is logged once on logger "kcache" and the run goes on as without it.
The bundle is written at exit (or by save_bundle()) by a run that did not load
a bundle matching all its calls.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from typing import Any, Callable, Optional

from . import _precompile_fixes
from ._bundle_header import BUNDLE_VERSION, OldBundle, bundle_key, pack, signature, system, unpack

logger = logging.getLogger("kcache")

FRESH_COMPILE_MODES = ("gpu", "always", "never")
MARKER_TTL_S = 24 * 3600  # how long "PyTorch packaged nothing" holds before a run tries again
_PRODUCER = "kcache.torch (compile bundle)"


class Bundles:
    """One process's bundle: fetched at enable(), loaded at the first
    torch.compile call if its header matches, saved at exit otherwise."""

    def __init__(self, session):
        self._session = session
        self._stats = session.stats
        self._system = system()
        self.key = bundle_key(session.settings.namespace, self._system)
        self._fetched: Optional[tuple[bytes, dict]] = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._signatures: list[dict] = []
        self._loaded: Optional[list[dict]] = None  # the loaded bundle's signatures
        # A marker's signatures: PyTorch packaged nothing for these calls.
        self._unsupported: Optional[list[dict]] = None
        self._marker_covers_all = True
        self._all_matched = True
        # Bundled functions (_bundle_watch.code_key) whose compiled functions ran, and those
        # Dynamo traced though the bundle has entries for them (-> first failing guard).
        # Only functions with a compiled function of their own are judged: a
        # frame whose graph is empty before its first break serves through its
        # resume function, and would never count as served itself.
        self._judged: set[tuple] = set()
        self._served: set[tuple] = set()
        self._missed: dict[tuple, str] = {}
        self._saved = False
        # This run compiles a call with precompile that no loaded bundle
        # covers: it will save, so its graphs compile afresh (module doc).
        self._recording = False
        # One process per run saves (and so compiles afresh): rank 0, as
        # torchrun numbers ranks; the others would save the same bundle.
        self._saver = os.environ.get("RANK", "0").strip() in ("", "0")
        self._fresh_compile = session.settings.bundle_fresh_compile
        if self._fresh_compile not in FRESH_COMPILE_MODES:
            raise ValueError(
                f"KCACHE_TORCH_BUNDLE_FRESH_COMPILE={self._fresh_compile!r} is not one of {FRESH_COMPILE_MODES}"
            )

    def start(self) -> None:
        threading.Thread(target=self._fetch, name="kcache-bundle", daemon=True).start()
        atexit.register(self.save)

    def _fetch(self) -> None:
        try:
            # Not through get_entry: the bundle stays out of the run manifest.
            self._fetched = self._session._fetch_entry(self.key)
        finally:
            self._done.set()

    def close(self) -> None:
        atexit.unregister(self.save)

    # ------------------------------------------------------------ compile

    def before_compile(self, model: Any, kwargs: dict) -> bool:
        """Called by the torch.compile wrapper; whether this call may use precompile."""
        sig = signature(model, kwargs)
        with self._lock:
            index = len(self._signatures)
            self._signatures.append(sig)
        if index == 0:
            self._load(sig)
            # Only now: a loaded bundle puts its own FX-graph and AOTAutograd
            # entries in the local caches, and the prefetch skips those.
            self._session.prefetch_to_local_caches()
        if self._unsupported is not None:
            if index < len(self._unsupported) and self._unsupported[index] == sig:
                return False  # as with bundles off
            self._marker_covers_all = False  # a call the marker is not about: try it
            _forget_local_entry(model)
            self._recording = self._saver
            return True
        if self._loaded is None:
            # A cold run: record precompile entries for the bundle. PyTorch
            # would also load its own local entry for this function, found by
            # name and line alone (a warm node's, maybe of other kwargs):
            # only an entry of a bundle whose signature matched may be used.
            _forget_local_entry(model)
            self._recording = self._saver
            return True
        matches = index < len(self._loaded) and self._loaded[index] == sig
        if not matches:
            self._all_matched = False
            self._stats["bundle_signature_mismatches"] += 1
        return matches

    def _load(self, sig: dict) -> None:
        wait_s = 2 * self._session.settings.timeout_ms / 1000 + 60  # a bundle may be large
        started = time.monotonic()
        done = self._done.wait(wait_s)
        self._stats["bundle_wait_ms"] += (time.monotonic() - started) * 1000  # what the fetch cost the compile
        if not done or self._fetched is None:
            self._stats["bundle_misses"] += 1
            self._all_matched = False
            return
        value = self._fetched[0]
        self._fetched = None
        try:
            header, bundle = unpack(value)
        except OldBundle:
            # An older kcache's bundle or marker: a cold run's path, which saves anew.
            self._stats["bundle_misses"] += 1
            self._all_matched = False
            return
        except ValueError as e:
            self._refused(f"unreadable header: {e}")
            return
        if header.get("system") != self._system:
            self._refused("made on another system (versions or devices differ)")
            return
        signatures = header.get("signatures") or []
        if not signatures or signatures[0] != sig:
            self._stats["bundle_signature_mismatches"] += 1
            self._all_matched = False
            logger.info("kcache: the compile bundle is for another model, compile kwargs or config; not loaded")
            return
        if header.get("unsupported"):
            age_s = time.time() - header.get("made_ms", 0) / 1000
            if age_s > MARKER_TTL_S:
                self._stats["bundle_markers_expired"] += 1
                self._all_matched = False
                return  # a cold run's path: PyTorch may package it now
            with self._lock:
                self._unsupported = signatures
            self._stats["bundle_unsupported"] += 1
            logger.info(
                "kcache: no usable compile bundle for this model (%s); compiling without caching precompile",
                header["unsupported"],
            )
            return
        import torch

        started = time.monotonic()
        try:
            info = torch.compiler.load_cache_artifacts(bundle)
        except Exception as e:  # noqa: BLE001 - PyTorch's refusal is a miss, never a crash
            self._refused(f"load_cache_artifacts raised {type(e).__name__}: {e}")
            return
        finally:
            self._stats["bundle_load_ms"] += (time.monotonic() - started) * 1000
        if info is None:
            self._refused("load_cache_artifacts found nothing in it")
            return
        try:
            _precompile_fixes.names_after_the_bundle(bundle)
        except Exception as e:  # noqa: BLE001 - a later trace may then collide, as in PyTorch alone
            logger.warning("kcache: cannot move Dynamo's global names past the compile bundle's: %s", e)
        self._loaded = signatures
        if self._session.prefetch is not None:
            self._session.prefetch.covered_by_bundle(
                {*info.artifacts.get("inductor", ()), *info.artifacts.get("aot_autograd", ())}
            )
        self._stats["bundle_hits"] += 1
        self._stats["bundle_bytes"] += len(value)
        self._stats["bundle_precompile_entries"] += len(info.artifacts.get("precompile", []))

    def skips_lookup(self, inputs: Any) -> bool:
        """Whether an FX-graph or AOTAutograd lookup of a graph with these
        example inputs misses on purpose (a run that saves: module doc)."""
        if not self._recording or self._saved or self._fresh_compile == "never":
            return False
        if self._fresh_compile == "gpu" and not _on_accelerator(inputs):
            return False
        with self._lock:
            first = self._stats["bundle_fresh_lookups"] == 0
            self._stats["bundle_fresh_lookups"] += 1
        if first:
            logger.info(
                "kcache: this run saves a compile bundle: its graphs compile afresh below Dynamo "
                "(PyTorch 2.11 cannot package a GPU graph loaded from its FX-graph cache)"
            )
        return True

    def failed(self, error: Exception) -> None:
        """before_compile raised: this call compiles without precompile, and no
        bundle is saved (its signature is unknown)."""
        with self._lock:
            self._saved = True  # nothing sound to save
            first = self._stats["bundle_errors"] == 0
            self._stats["bundle_errors"] += 1
        if first:
            logger.warning("kcache: compile bundles off for this run (%s: %s)", type(error).__name__, error)

    @property
    def install_failures(self) -> int:
        return self._stats["bundle_install_failures"]

    def install_failed(self, error: BaseException) -> None:
        """PyTorch could not install the loaded bundle's precompile entries
        (their guards would not load, say): this call traces as without the
        bundle, and a marker keeps the next runs from loading it again."""
        with self._lock:
            first = self._stats["bundle_install_failures"] == 0
            self._stats["bundle_install_failures"] += 1
        if first:
            logger.warning(
                "kcache: PyTorch could not install compile bundle %s (%s: %s); tracing as without it",
                self.key,
                type(error).__name__,
                error,
            )
            self._put_marker_instead(f"PyTorch could not install it: {type(error).__name__}: {error}")

    @property
    def watching_calls(self) -> bool:
        """Whether a bundle is loaded, so its functions' calls are judged."""
        return self._loaded is not None

    def served(self, function: tuple) -> None:
        """A compiled function of the bundled function ran: its guards passed."""
        with self._lock:
            self._served.add(function)

    def judge(self, functions) -> None:
        """These bundled functions have compiled functions that report their calls."""
        with self._lock:
            self._judged.update(functions)

    def needs_judging(self, function: tuple) -> bool:
        """Whether a miss of this function is still to be recorded."""
        return function in self._judged and function not in self._missed

    def missed(self, function: tuple, reason: str) -> None:
        """Dynamo converts a function the loaded bundle has entries for: their
        guards failed this call. Judged at exit (save)."""
        with self._lock:
            self._missed.setdefault(function, reason)

    def _never_served(self) -> Optional[str]:
        """A bundled function that missed and never served, with its first failing guard."""
        with self._lock:
            for function, reason in self._missed.items():
                if function not in self._served:
                    return f"{function[0]} (line {function[1]}): {reason}"
        return None

    def _put_marker_instead(self, why: str) -> None:
        """The loaded bundle costs runs and serves them nothing: a marker
        replaces it (rank 0 alone, as it alone saves), so the next runs
        compile without precompile; after the marker's day one saves anew."""
        with self._lock:
            signatures = list(self._loaded or self._signatures)
            self._all_matched = False
            self._saved = True  # this run's package is not one to save
        if self._saver:
            self._put_unsupported(signatures, why[:500])

    def frame_left_out(self, code, error: Exception) -> None:
        """PyTorch could not package one compiled frame: it stays out of the bundle."""
        with self._lock:
            first = self._stats["bundle_frames_left_out"] == 0
            self._stats["bundle_frames_left_out"] += 1
        if first:
            logger.info(
                "kcache: %s is left out of the compile bundle (%s); a fresh node traces it", code.co_name, error
            )

    def _refused(self, why: str) -> None:
        self._stats["bundle_refused"] += 1
        self._all_matched = False
        logger.warning("kcache: compile bundle %s not used (%s); compiling as without it", self.key, why)

    # ------------------------------------------------------------ save

    def _put_unsupported(self, signatures: list[dict], why: str) -> None:
        header = {
            "version": BUNDLE_VERSION,
            "system": self._system,
            "signatures": signatures,
            "unsupported": why,
            "made_ms": int(time.time() * 1000),
        }
        metadata = {"torch_cache": "compile-bundle", "unsupported": why}
        if self._session._store(self.key, pack(header, b""), metadata, _PRODUCER):
            self._stats["bundle_unsupported_puts"] += 1

    def save(self) -> bool:
        """Puts this run's bundle in kcache, unless a loaded bundle already
        covered every torch.compile call (then it would be the same)."""
        never_served = self._never_served() if self._loaded is not None and not self._saved else None
        if never_served is not None:
            self._stats["bundle_functions_never_served"] += 1
            logger.warning(
                "kcache: compile bundle %s served no call of %s; the next runs compile without it",
                self.key,
                never_served,
            )
            self._put_marker_instead(f"it served no call of {never_served}")
            return False
        with self._lock:
            if self._saved or not self._signatures or not self._saver:
                return False
            if self._loaded is not None and self._all_matched and len(self._signatures) == len(self._loaded):
                return False
            if (
                self._unsupported is not None
                and self._marker_covers_all
                and len(self._signatures) <= len(self._unsupported)
            ):
                return False  # every call was one PyTorch packaged nothing for
            self._saved = True
            signatures = list(self._signatures)
        if not _distinct_targets(signatures):
            self._stats["bundle_not_saved"] += 1
            logger.info("kcache: one function compiled twice with different settings; no compile bundle saved")
            self._put_unsupported(signatures, "one function compiled twice with different settings")
            return False
        import torch

        try:
            saved = torch.compiler.save_cache_artifacts()
        except Exception as e:  # noqa: BLE001 - no bundle is a slower next start, not an error
            logger.warning("kcache: save_cache_artifacts raised %s: %s; no compile bundle saved", type(e).__name__, e)
            return False
        if saved is None:
            return False
        bundle, info = saved
        precompile = _usable_precompile_entries(bundle)
        if precompile == 0:
            # PyTorch left every compiled function out of its package (e.g.
            # "Backend not found"): a fresh node would trace anyway, and part
            # 1's prefetch serves the same cache entries without the bundle.
            # The marker tells the next run of these signatures not to try.
            self._stats["bundle_not_saved"] += 1
            logger.info("kcache: PyTorch packaged no compiled function of this run; no compile bundle saved")
            self._put_unsupported(signatures, "PyTorch packaged no compiled function")
            return False
        header = {"version": BUNDLE_VERSION, "system": self._system, "signatures": signatures}
        metadata = {"torch_cache": "compile-bundle", "precompile_entries": str(precompile)}
        if self._session._store(self.key, pack(header, bundle), metadata, _PRODUCER):
            self._stats["bundle_puts"] += 1
            return True
        # Refused (too large, say) or kcached away: a marker, if it takes one,
        # keeps the next runs from compiling afresh for a bundle that does not come.
        self._stats["bundle_not_saved"] += 1
        self._put_unsupported(signatures, f"kcached did not take the {len(bundle)}-byte bundle")
        return False


def _forget_local_entry(model: Any) -> None:
    import shutil

    import torch
    from torch._dynamo.package import CompilePackage, DynamoCache

    fn = model.forward if isinstance(model, torch.nn.Module) else model
    shutil.rmtree(os.path.join(DynamoCache.path_prefix(), CompilePackage.source_id_from_fn(fn)), ignore_errors=True)


def _on_accelerator(inputs: Any) -> bool:
    import torch

    try:
        return any(isinstance(t, torch.Tensor) and t.device.type not in ("cpu", "meta") for t in inputs)
    except TypeError:  # not a sequence: unknown, so not skipped
        return False


def _usable_precompile_entries(bundle: bytes) -> int:
    """Precompile entries with at least one compiled graph PyTorch did not
    bypass. A bypassed code is traced again: 2.11 bypasses the code holding a
    graph whose backend it did not record ("Backend not found" at save; seen
    with a grad-enabled forward saved before any backward, and on a GPU for
    a graph loaded from the FX-graph cache, which
    _precompile_fixes._fresh_compiles_when_saving avoids)."""
    import pickle

    from torch.compiler._cache import CacheArtifactManager

    artifacts = CacheArtifactManager.deserialize(bundle) or {}
    usable = 0
    for artifact in artifacts.get("precompile", []):
        try:
            entry = pickle.loads(artifact.content)
            usable += int(any(c.backend_ids and not c.bypassed for c in entry.dynamo.codes))
        except Exception:  # noqa: BLE001 - an entry we cannot read is not counted
            continue
    return usable


def _distinct_targets(signatures: list[dict]) -> bool:
    # PyTorch keys a precompile entry by function name and line: two calls on
    # one target with different settings would share (and overwrite) it.
    seen: dict[str, dict] = {}
    for sig in signatures:
        if seen.setdefault(sig["target"], sig) != sig:
            return False
    return True


def install(bundles: Bundles) -> Callable[[], None]:
    """Switches caching_precompile on and wraps torch.compile; returns the undo."""
    import torch

    config = torch._dynamo.config
    before_flag = config.caching_precompile
    original = torch.compile

    @functools.wraps(original)
    def compile(model=None, **kwargs):  # noqa: A001 - torch.compile's own name
        if model is None:  # decorator with arguments: no model to sign yet
            return lambda m: compile(m, **kwargs)
        try:
            use = bundles.before_compile(model, kwargs)
        except Exception as e:  # noqa: BLE001 - kcache never stops a compile
            bundles.failed(e)
            use = False
        previous = config.caching_precompile
        config.caching_precompile = use
        failures = bundles.install_failures
        try:
            return original(model, **kwargs)
        except Exception:
            if not use or bundles.install_failures == failures:
                raise  # the call's own error, not the bundle's
            # The bundle's install failed and PyTorch still could not start
            # afresh (_precompile_fixes._survive_failed_installs): as without precompile.
            config.caching_precompile = False
            return original(model, **kwargs)
        finally:
            config.caching_precompile = previous

    compile._kcache_bundles = True  # the KCACHE_TORCH=1 hook's first call goes through it
    config.caching_precompile = True
    torch.compile = compile
    undo_package = _precompile_fixes.patch(bundles)

    def undo() -> None:
        undo_package()
        torch.compile = original
        config.caching_precompile = before_flag
        bundles.close()

    return undo


