"""kcache as the remote cache of torch.compile.

    import kcache.torch
    kcache.torch.enable(url="http://kcached:7070", namespace="team-a")
    model = torch.compile(model)

enable() makes kcache the backend of Inductor's five remote caches (FX graph,
AOTAutograd, autotune, bundled autotune, Dynamo PGO) and of Triton's remote
cache manager, and switches those caches on. Call it before the first
torch.compile: Inductor's compile workers inherit its settings through the
environment.

Importing Dynamo and Inductor costs seconds (3.7-4.0 s on the H100 host), so
enable() only opens the session and starts the prefetch; it puts its hooks
into Inductor at the first torch.compile, where torch imports them anyway, or
at once when Dynamo is already imported or defer_hooks=False (for code that
compiles without torch.compile: torch._dynamo.optimize, AOTInductor, or a
`compile` bound before enable()). An eager job, or the eager steps before an
async compile switches, never pays for them. With bundles on, enable()
imports Dynamo itself (it switches caching precompile) and hooks in at once.

- Single-flight across ranks: on an FX-graph or AOTAutograd miss the first
  rank takes a lease in kcached and compiles; the others wait (up to
  lease_wait_s) for its put and then hit. A dead rank's lease ends after
  lease_ttl_s.
- Each FX-graph and AOTAutograd entry keeps Inductor's hash details, so
  `kcache explain A B` names the inputs that made two keys differ.
- Fail open: with kcached down or slow, torch.compile runs as with no remote
  cache; stats() counts the errors.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Optional

from ._session import Session, Settings, share_with_env

__all__ = ["enable", "disable", "stats", "save_bundle", "report_step", "compile", "Settings"]

_TRITON_BACKEND = "kcache.torch.triton_backend:KcacheTritonBackend"
_TRITON_MANAGER = "kcache.torch.triton_backend:KcacheCacheManager"

# Inductor's switches, as config attributes and as the environment variables
# its compile workers read.
_SWITCHES = (
    ("torch._inductor.config", "fx_graph_remote_cache", "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE"),
    ("torch._inductor.config", "autotune_remote_cache", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE"),
    (
        "torch._inductor.config",
        "bundled_autotune_remote_cache",
        "TORCHINDUCTOR_BUNDLED_AUTOTUNE_REMOTE_CACHE",
    ),
    ("torch._functorch.config", "enable_remote_autograd_cache", "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE"),
    ("torch._dynamo.config", "automatic_dynamic_remote_pgo", "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO"),
)

_session: Optional[Session] = None
_undo: list[Callable[[], None]] = []  # what enable() changed, undone in reverse by disable()


def enable(
    url: Optional[str] = None,
    namespace: Optional[str] = None,
    token: Optional[str] = None,
    triton: bool = True,
    bundled_autotune: bool = False,
    defer_hooks: Optional[bool] = None,
    **settings,
) -> Session:
    """Makes kcache torch.compile's remote cache in this process and the
    processes it starts. url and namespace default to $KCACHE_URL and
    $KCACHE_NAMESPACE; other keyword arguments are Settings fields.

    All five Inductor caches get kcache as their backend; four are switched
    on. The bundled autotune cache is switched on only with
    bundled_autotune=True: in torch 2.11 its bundler asserts on CPU graphs (no
    Triton backend hash) and on local FX-graph hits of multi-graph models
    (begin_compile without end_compile; seen with GPT-2 on an H100).

    defer_hooks: None puts the Inductor hooks in at the first torch.compile
    unless Dynamo is already imported; False puts them in now; True always
    waits for the first torch.compile."""
    global _session

    if _session is not None:
        disable()
    base = Settings.from_env()
    fields = {k: v for k, v in (("url", url), ("namespace", namespace), ("token", token)) if v is not None}
    config = dataclasses.replace(base, **fields, **settings)
    session = Session(config)
    for name, value in config.environment().items():
        _set_env(name, value)
    # The run manifest's entries come in while the caller builds its model.
    session.start_prefetch()
    if config.bundles:  # fetched now, loaded at the first torch.compile (see _bundles)
        _undo.append(_start_bundles(session))
    _undo.append(share_with_env(session))
    _expose_package_to_workers()
    if triton:
        _set_env("TRITON_CACHE_MANAGER", _TRITON_MANAGER)
        _set_env("TRITON_REMOTE_CACHE_BACKEND", _TRITON_BACKEND)
    if config.report:  # eager steps count from now; its Dynamo hooks come with the others
        _undo.append(_start_report(session))
    hooks = functools.partial(_install_failing_open, functools.partial(_install_compile_hooks, session, bundled_autotune))
    if defer_hooks is False or (defer_hooks is None and _compiler_imported()):
        hooks()
    else:
        _undo.append(_before_first_compile(hooks))
    _session = session
    return session


def _compiler_imported() -> bool:
    return "torch._dynamo" in sys.modules or "torch._inductor" in sys.modules


def _install_compile_hooks(session: Session, bundled_autotune: bool) -> None:
    """kcache's backends in Inductor's caches, its compile workers and switches,
    the hash details and the report's Dynamo hooks: what imports Dynamo and
    Inductor."""
    import importlib

    from . import compile_workers, inductor_backend

    previous_backends = inductor_backend.install(session)
    _undo.append(lambda: inductor_backend.restore(previous_backends))
    _undo.append(compile_workers.use_in_compile_workers())
    for module_name, attribute, env in _SWITCHES:
        if attribute == "bundled_autotune_remote_cache" and not (bundled_autotune and _has_triton_device()):
            continue
        module = importlib.import_module(module_name)
        _undo.append(functools.partial(setattr, module, attribute, getattr(module, attribute)))
        setattr(module, attribute, True)
        _set_env(env, "1")
    if session.settings.keep_tuned_configs:
        from . import _coordesc

        _undo.append(_coordesc.install())
    if session.settings.defer_compile_pool:
        _undo.append(_defer_compile_pool(session))
    if session.settings.float_specializations:
        _undo.append(_remember_float_specializations(session))
    session.hash_details.install()
    _undo.append(session.hash_details.uninstall)
    if session.bundles is None:  # with bundles: once the bundle is known (Bundles.before_compile)
        session.prefetch_to_local_caches()
    report = getattr(session, "report", None)
    if report is not None:  # after the hash details: a miss's explain reads them
        report.hook()


def _defer_compile_pool(session: Session) -> Callable[[], None]:
    """Inductor's compile workers start when a graph compiles (_compile_pool);
    a torch without the functions it wraps keeps Inductor's own timing."""
    from . import _compile_pool

    try:
        session.compile_pool, undo = _compile_pool.install()
    except (AttributeError, KeyError, ImportError) as e:
        logging.getLogger("kcache").info("kcache: compile workers start as Inductor starts them (%s: %s)", type(e).__name__, e)
        return lambda: None
    return undo


def _remember_float_specializations(session: Session) -> Callable[[], None]:
    """Dynamo's float-specialization restarts made once per run (_tensorify);
    a torch without the parts it wraps keeps Dynamo's own restarts."""
    try:
        return session.float_specializations().install()
    except (AttributeError, ImportError) as e:
        logging.getLogger("kcache").info("kcache: float specializations not remembered (%s: %s)", type(e).__name__, e)
        return lambda: None


def _install_failing_open(install: Callable[[], None]) -> None:
    """A failing install is a WARNING and torch.compile goes on without
    kcache's backends (fail open); what it did put in is undone by disable()."""
    try:
        install()
    except Exception as e:  # noqa: BLE001 - kcache never stops a trainer or a compile
        logging.getLogger("kcache").warning(
            "kcache: could not hook into Inductor (%s: %s); torch.compile runs without the remote cache",
            type(e).__name__,
            e,
        )


def _before_first_compile(install: Callable[[], None]) -> Callable[[], None]:
    """Wraps torch.compile so that install() runs once, before the first
    compile; returns the undo."""
    import torch

    original = torch.compile
    lock = threading.Lock()
    pending = [True]

    @functools.wraps(original)
    def compile(*args, **kwargs):  # noqa: A001 - torch.compile's own name
        with lock:
            if pending:
                pending.clear()
                install()
        return original(*args, **kwargs)

    # functools.wraps copied the markers of a wrapper this one wraps (the
    # KCACHE_TORCH=1 hook's, the bundles'): they would make the hook dispatch
    # through this one as if it were the bundles' wrapper.
    for marker in ("_kcache_bundles", "_kcache_autoenable"):
        compile.__dict__.pop(marker, None)
    torch.compile = compile

    def undo() -> None:
        pending.clear()  # a wrapper left in place (someone wrapped ours) installs nothing for a closed session
        if torch.compile is compile:  # not if someone wrapped it after us
            torch.compile = original

    return undo


def disable() -> None:
    """Undoes enable(): Inductor's and Triton's caches as they were."""
    global _session
    if _session is None:
        return
    while _undo:
        _undo.pop()()
    _session.close()
    _session = None


def stats() -> dict:
    """Counters of this process's session: hits, misses and puts per cache,
    leases granted and waited for, errors and breaker trips; with
    verify_signatures, entries verified and refused (verify_rejected)."""
    if _session is None:
        return {}
    out = dict(_session.stats)
    if _session.settings.verify_signatures:
        verification = _session.client.verification_stats()
        out["verified"] = verification.get("verified", 0)
        out["verify_rejected"] = verification.get("rejected_total", 0)
    return out


def report_step(seconds: float, eager: bool = False) -> None:
    """Marks one training step of `seconds` (eager=True: a step run without
    torch.compile) for the run report's return on investment: eager vs
    compiled step time and the break-even step. Without marks the report
    has no ROI."""
    report = getattr(_session, "report", None)
    if report is not None:
        report.step(seconds, eager)


def compile(
    model,
    *,
    async_compile: bool = False,
    factory: Optional[Callable] = None,
    async_timeout_s: float = 3600.0,
    **torch_compile_kwargs,
):
    """torch.compile(model, **torch_compile_kwargs) with kcache enabled (from
    the environment unless enable() was called). async_compile=True: the
    module runs eager while a separate process compiles it into kcache, then
    switches to a warm load between two steps (see _async_compile); factory
    is a picklable callable (importable by name) that builds the module in
    that process; a compile longer than async_timeout_s is given up."""
    if _session is None:
        from ._from_env import enable_from_env

        enable_from_env()
    if not async_compile:
        import torch

        return torch.compile(model, **torch_compile_kwargs)
    from ._async_compile import AsyncCompiled

    return AsyncCompiled(model, torch_compile_kwargs, factory=factory, timeout_s=async_timeout_s)


def _session_or_none() -> Optional[Session]:
    return _session


def _start_report(session: Session) -> Callable[[], None]:
    from . import _report

    session.report = _report.Report(session, session.settings.report_interval_s)
    session.report.start()
    return session.report.uninstall


def save_bundle() -> bool:
    """Puts this run's compile bundle (KCACHE_TORCH_BUNDLES=1) in kcache now
    rather than at exit; whether one was stored."""
    bundles = getattr(_session, "bundles", None)
    return bundles.save() if bundles is not None else False


def _start_bundles(session: Session) -> Callable[[], None]:
    from . import _bundles

    session.bundles = _bundles.Bundles(session)
    session.bundles.start()
    return _bundles.install(session.bundles)


def _has_triton_device() -> bool:
    import torch

    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def _set_env(name: str, value: str) -> None:
    before = os.environ.get(name)

    def restore() -> None:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before

    _undo.append(restore)
    os.environ[name] = value


def _expose_package_to_workers() -> None:
    """Triton imports the backend by name in Inductor's compile workers: make
    this copy of kcache importable there when it is not installed."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths and "site-packages" not in root:
        _set_env("PYTHONPATH", os.pathsep.join([root, *paths]))
