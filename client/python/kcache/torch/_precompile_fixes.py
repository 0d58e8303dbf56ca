"""PyTorch 2.11's caching precompile, made to fail open for kcache's bundles.

Each wrapper closes one gap seen with real models (the docstrings say where):
a frame without an importable name, a failed install, guards that cannot be
saved, a run that saves a bundle of graphs it loaded from a cache. patch()
puts them in, with _bundle_watch's watch of bundled calls, and returns the
undo. names_after_the_bundle() runs as a bundle loads: Dynamo's global names
would otherwise collide with the loaded bundle's.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import re
from typing import TYPE_CHECKING, Any, Callable

from ._bundle_watch import note_first_backend_calls, watch_bundled_calls

if TYPE_CHECKING:
    from ._bundles import Bundles

logger = logging.getLogger("kcache")


def _nothing_to_undo() -> None:
    return None


def patch(bundles: Bundles) -> Callable[[], None]:
    """Puts every wrapper in; returns the undo (in reverse)."""
    undo_frames = _tolerate_unpackageable_frames(bundles)
    undo_install = _survive_failed_installs(bundles)
    undo_guards = _tolerate_unsaveable_guards()
    try:
        undo_watch = watch_bundled_calls(bundles)
    except (ImportError, AttributeError) as e:  # another torch: a bundle that serves nothing is kept
        logger.info("kcache: cannot tell whether a loaded compile bundle serves its calls (%s)", e)
        undo_watch = _nothing_to_undo

    try:
        undo_lookups = _fresh_compiles_when_saving(bundles)
    except (ImportError, AttributeError, KeyError) as e:  # another torch: bundles as before, said once
        logger.warning("kcache: cannot make a saving run compile afresh (%s: %s); GPU bundles may be empty", type(e).__name__, e)
        undo_lookups = _nothing_to_undo

    def undo() -> None:
        undo_lookups()
        undo_watch()
        undo_guards()
        undo_install()
        undo_frames()

    return undo


def _tolerate_unpackageable_frames(bundles: Bundles) -> Callable[[], None]:
    """PyTorch 2.11 raises PackageError out of torch.compile'd code when a
    frame Dynamo compiles after a graph break has no importable name (GPT-2's
    loss_function, reached through a property): the compile fails instead of
    leaving that frame out of the package. Leave it out (a bypassed entry,
    which PyTorch itself skips at install): a fresh node traces that frame."""
    from torch._dynamo import package
    from torch._dynamo.exc import PackageError

    cls = package.CompilePackage
    original = cls._add_user_function

    def add_user_function(self, code) -> None:
        try:
            original(self, code)
        except PackageError as e:
            module = inspect.getmodule(code)
            # install() looks the module up even for a bypassed entry; code
            # made by exec (a dataclass's __init__) has none: any module does.
            self._add_function(code, module.__name__ if module is not None else "builtins")
            self._codes[code].bypassed = True
            bundles.frame_left_out(code, e)

    cls._add_user_function = add_user_function
    return lambda: setattr(cls, "_add_user_function", original)


def _survive_failed_installs(bundles: Bundles) -> Callable[[], None]:
    """When CompilePackage.install fails (seen on the CPU with transformers'
    GPT-2 and dynamic=True: a guard source's __post_init__ installs a guard
    while the guards are unpickled, outside any trace), PyTorch 2.11 means to
    log it and start a fresh package, but its fresh start asserts the package
    is not initialized, so torch.compile raises. Undo what the install put
    in, mark the package uninitialized and raise the RuntimeError PyTorch
    falls back on; the bundle is marked unusable for the next runs."""
    from torch._dynamo import package

    cls = package.CompilePackage
    original = cls.install

    @functools.wraps(original)
    def install(self, backends) -> None:
        try:
            original(self, backends)
        except Exception as e:  # noqa: BLE001 - any failure: PyTorch's fresh start, as for a RuntimeError
            bundles.install_failed(e)
            undo_partial_install(self)
            raise RuntimeError(f"kcache: compile bundle not installed: {type(e).__name__}: {e}") from e
        try:
            note_first_backend_calls(self, bundles)
        except Exception as e:  # noqa: BLE001 - a bundle that serves nothing is then kept, as before
            logger.debug("kcache: cannot watch the compile bundle's calls: %s", e)

    cls.install = install
    return lambda: setattr(cls, "install", original)


# A name Dynamo's unique_id() numbered, as a bundle's pickles hold it (the
# builtins dict of a frame's guards, a compiled function, before its uuid, a
# resume function, a comprehension).
_NUMBERED_NAME = re.compile(rb"__(?:builtins_dict__|compiled_fn|resume_at_\d+|comprehension_\w+?_at_\d+)_(\d+)")


def names_after_the_bundle(bundle: bytes) -> None:
    """Dynamo names the globals it installs from one counter per process, and
    a package installs the saving process's names: a trace after the load (a
    new shape) made the same name as an installed one and PyTorch 2.11
    asserted "name not in scope" out of the torch.compile'd call, and a
    package installed after such a trace would overwrite its resume function
    unchecked (wrong results). The counter moves past every numbered name in
    the bundle's raw bytes (its pickles keep them verbatim; 20-30 ms for 60
    MB) before anything is installed or traced; a number skipped costs
    nothing."""
    from torch._dynamo import bytecode_transformation

    highest = max((int(m.group(1)) for m in _NUMBERED_NAME.finditer(bundle)), default=-1)
    current = next(bytecode_transformation._unique_id_counter)
    bytecode_transformation._unique_id_counter = itertools.count(max(current + 1, highest + 1))


def undo_partial_install(package: Any) -> None:
    """What CompilePackage.install put in before it failed, taken out, and
    the package emptied and uninitialized, so PyTorch's fresh start records
    a new one: the globals it installed (popped whether or not a name came
    twice) and the precompile entries on every code it may have reached.
    Functions it marked to skip (trivial ones, with no graph) stay skipped."""
    from torch._C._dynamo.eval_frame import _reset_precompile_entries
    from torch._dynamo.package import _lookup_code

    for module, names in getattr(package, "_installed_globals", {}).items():
        for name in names:
            module.__dict__.pop(name, None)
    package._installed_globals = {}
    for code, entry in list(getattr(package, "_codes", {}).items()):
        targets = [code]
        if entry.code_source:
            try:
                targets.append(_lookup_code(entry))
            except Exception:  # noqa: BLE001 - not found: nothing was installed on it
                pass
        for target in targets:
            try:
                _reset_precompile_entries(target)
            except Exception:  # noqa: BLE001 - no entries on it
                pass
    package._codes = {}
    package._resume_codes = set()
    package._cached_backends = {}
    package._current_entry = None
    package._initialized = False


def _fresh_compiles_when_saving(bundles: Bundles) -> Callable[[], None]:
    """Makes the FX-graph and AOTAutograd lookups of a run that saves a bundle
    miss (Bundles.skips_lookup decides), so Inductor compiles each graph and
    PyTorch can package it; what it compiles is still put in the caches."""
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache
    from torch._inductor.codecache import FxGraphCache

    def wrap(
        cls: type, name: str, inputs_at: int, inputs_name: str, miss: Callable[[], Any], packaged: Callable
    ) -> Callable[[], None]:
        original = cls.__dict__[name]  # the staticmethod object, put back as it was
        function = original.__func__

        @functools.wraps(function)
        def lookup(*args, **kwargs):
            inputs = args[inputs_at] if len(args) > inputs_at else kwargs.get(inputs_name, ())
            if packaged(args, kwargs) and bundles.skips_lookup(inputs):
                return miss()
            return function(*args, **kwargs)

        setattr(cls, name, staticmethod(lookup))
        return lambda: setattr(cls, name, original)

    def aot_packaged(args: tuple, kwargs: dict) -> bool:
        # Dynamo sets precompile_backend_id only on a graph it packages; a
        # standalone compile's load passes no config and expects its entry.
        aot_config = args[5] if len(args) > 5 else kwargs.get("aot_config")
        return getattr(aot_config, "precompile_backend_id", None) is not None

    # AOTAutogradCache._lookup(key, local, remote, args, cache_info, aot_config) -> entry or None;
    # FxGraphCache._lookup_graph(key, example_inputs, local, remote_cache, ...) -> (graph, info).
    # An FX lookup does not say whose graph it is: every one in a saving run misses.
    undo_aot = wrap(AOTAutogradCache, "_lookup", 3, "args", lambda: None, aot_packaged)
    undo_fx = wrap(FxGraphCache, "_lookup_graph", 1, "example_inputs", lambda: (None, {}), lambda a, k: True)

    def undo() -> None:
        undo_fx()
        undo_aot()

    return undo


def _tolerate_unsaveable_guards() -> Callable[[], None]:
    """A frame whose guards PyTorch 2.11 cannot serialize fails the compile
    under caching_precompile: a PackageError makes it bypass the frame's
    package entry and then assert guards_state is not None
    (convert_frame._compile_inner; GPT-2 on an H100), and an object of a class
    defined in local scope (a model class made inside a function) raises a
    TypeError out of serialize_guards. Either way the frame can compile without
    precompile, as PyTorch means for a bypassed entry: its package entry is
    bypassed (add_guarded_code returns early for it, so the empty guards are
    never stored) and Dynamo goes on."""
    from torch._dynamo import guards

    cls = guards.CheckFunctionManager
    original = cls.serialize_guards

    @functools.wraps(original)
    def serialize_guards(self, builder, sorted_guards, output_graph) -> bytes:
        try:
            return original(self, builder, sorted_guards, output_graph)
        except Exception as e:  # noqa: BLE001 - any failure to save guards
            try:
                output_graph.bypass_package(f"kcache: guards cannot be saved: {e}")
            except Exception:  # noqa: BLE001 - cannot bypass (strict_precompile): PyTorch's own error
                raise e from None
            return b""

    cls.serialize_guards = serialize_guards
    return lambda: setattr(cls, "serialize_guards", original)
