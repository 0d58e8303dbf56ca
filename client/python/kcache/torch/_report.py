"""A compile report for every run (issue 20): what this process compiled,
hit, missed, recompiled and broke, with the reasons, PUT to kcached under
namespace/run/rank at exit and every `interval_s` (`kcache runs`, `kcache run
NS/RUN`).

Collected from PyTorch's own hooks, each called once per compile, never per
step: Dynamo's recompilation reasons (convert_frame's guard-failure check),
its graph-break log call, its compile-time metrics and unique-graph counter,
and kcache's own Inductor backend lookups. Each FX-graph miss is explained
against the nearest earlier key of this process (the one sharing most of
Inductor's hash-detail lines): the fields that differ.

Fail open: a failed PUT is logged once through the `kcache` logger.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import re
import socket
import statistics
import sys
import threading
import time
from typing import Any, Callable, Optional

from kcache._native import Status

from . import _keys
from ._prefetch import fingerprint

_log = logging.getLogger("kcache")

# Each list in a report is bounded: a run with thousands of recompiles still
# sends one small document (kcached takes at most 1 MiB).
_MAX_ITEMS = 200
_MAX_REASON_CHARS = 2000
_NAME = re.compile(r"[^A-Za-z0-9._:+=-]")


def _name(text: str) -> str:
    return _NAME.sub("-", text)[:128] or "-"


def run_identity() -> tuple[str, str]:
    """(run, rank): the run is $KCACHE_RUN_ID, else torchrun's run id, else the
    run manifest's fingerprint (script + argv + torch version); the rank is
    $RANK, else host-pid."""
    run = os.environ.get("KCACHE_RUN_ID") or os.environ.get("TORCHELASTIC_RUN_ID") or ""
    if not run or run == "none":
        run = fingerprint()[:16]
    rank = os.environ.get("RANK")
    return _name(run), _name(f"rank{rank}" if rank else f"{socket.gethostname()}-{os.getpid()}")


def _field(line: str) -> str:
    """ "[hash] name: value" -> "name"."""
    text = line.split("]", 1)[-1].strip()
    return text.split(":", 1)[0].strip()


def explain(lines: Optional[list[str]], earlier: dict[str, list[str]]) -> str:
    """Which hash-detail fields differ from the nearest earlier key."""
    if not lines:
        return "no hash details recorded for this key"
    if not earlier:
        return "first compile of this graph in this process (no earlier entry to compare)"
    mine = set(lines)
    nearest_key, nearest = max(earlier.items(), key=lambda kv: len(mine & set(kv[1])))
    differ = sorted({_field(x) for x in mine.symmetric_difference(nearest)})
    if not differ:
        return f"same inputs as {nearest_key}"
    return f"differs from {nearest_key} in: " + ", ".join(differ)


class Report:
    def __init__(self, session, interval_s: float = 60.0):
        self._session = session
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self.run, self.rank = run_identity()
        self.started_ms = int(time.time() * 1000)
        self.misses: list[dict] = []
        self.hits: list[dict] = []
        self.recompiles: list[dict] = []
        self.graph_breaks: list[dict] = []
        self._seen_details: dict[str, list[str]] = {}  # FX keys looked up so far -> hash details
        self._steps: dict[bool, list[float]] = {True: [], False: []}  # eager? -> step seconds
        self._undo: list[Callable[[], None]] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._put_failed = False

    # Hooks.

    def start(self) -> None:
        """Puts the report at exit and every interval_s; steps count from now."""
        atexit.register(self.put)
        self._undo.append(lambda: atexit.unregister(self.put))
        if self._interval_s > 0:
            self._thread = threading.Thread(target=self._loop, name="kcache-report", daemon=True)
            self._thread.start()

    def hook(self) -> None:
        """Dynamo's recompile and graph-break hooks and kcache's lookups: they
        import Dynamo and Inductor, so enable() calls this with its other
        compile hooks (at the first torch.compile, unless earlier)."""
        import torch._dynamo.convert_frame as convert_frame
        import torch._dynamo.symbolic_convert as symbolic_convert

        from . import inductor_backend

        self._patch(convert_frame, "get_and_maybe_log_recompilation_reasons", self._on_recompile_check)
        self._patch(symbolic_convert.InstructionTranslatorBase, "log_graph_break", self._on_graph_break)
        self._patch(inductor_backend.KcacheInductorBackend, "_get", self._on_lookup)

    def uninstall(self) -> None:
        self._stop.set()
        while self._undo:
            self._undo.pop()()
        self.put()

    def _patch(self, owner: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        original = getattr(owner, name)
        setattr(owner, name, functools.wraps(original)(make(original)))
        self._undo.append(lambda: setattr(owner, name, original))

    def _add(self, items: list, item: dict) -> None:
        with self._lock:
            if len(items) < _MAX_ITEMS:
                items.append(item)

    def _on_recompile_check(self, original: Callable) -> Callable:
        def wrapper(cache_entry, frame, *args, **kwargs):
            reasons = original(cache_entry, frame, *args, **kwargs)
            if not kwargs.get("skip_logging") and reasons:
                code = frame.f_code
                self._add(
                    self.recompiles,
                    {
                        "what": f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})",
                        "reason": "; ".join(reasons)[:_MAX_REASON_CHARS],
                    },
                )
            return reasons

        return wrapper

    def _on_graph_break(self, original: Callable) -> Callable:
        report = self

        def wrapper(self, code_options, reason, exc, *args, **kwargs):
            if not getattr(exc, "logged", False):
                code = getattr(self, "f_code", None)
                where = f"{code.co_name} ({os.path.basename(code.co_filename)}:{self.lineno})" if code else "?"
                report._add(report.graph_breaks, {"what": where, "reason": str(reason)[:_MAX_REASON_CHARS]})
            return original(self, code_options, reason, exc, *args, **kwargs)

        return wrapper

    def _on_lookup(self, original: Callable) -> Callable:
        report = self

        def wrapper(self, key: str):
            data = original(self, key)
            if self._cache == "fx-graph":
                report._on_fx_lookup(key, data is not None)
            return data

        return wrapper

    def _on_fx_lookup(self, remote_key: str, hit: bool) -> None:
        _, inductor_key = _keys.split_inductor_key(remote_key)
        lines = self._session.hash_details.lines(inductor_key)
        with self._lock:
            earlier = {k: v for k, v in self._seen_details.items() if k != inductor_key}
            if lines and len(self._seen_details) < 4 * _MAX_ITEMS:
                self._seen_details[inductor_key] = list(lines)
        item = {"what": f"fx-graph {inductor_key}", "key": inductor_key}
        if hit:
            self._add(self.hits, item)
        else:
            item["reason"] = explain(lines, earlier)
            self._add(self.misses, item)

    def step(self, seconds: float, eager: bool = False) -> None:
        with self._lock:
            steps = self._steps[eager]
            if len(steps) < 100_000:
                steps.append(seconds)

    # The document.

    def _roi(self, compile_s: float) -> Optional[dict]:
        with self._lock:
            eager, compiled = list(self._steps[True]), list(self._steps[False])
        if not eager or len(compiled) < 2:
            return None
        eager_s = statistics.median(eager)
        compiled_s = statistics.median(compiled[1:])  # the first compiled step pays the compile
        saving = eager_s - compiled_s
        return {
            "eager_step_s": eager_s,
            "compiled_step_s": compiled_s,
            "speedup": eager_s / compiled_s if compiled_s > 0 else None,
            "break_even_step": int(compile_s / saving) + 1 if saving > 0 else None,
        }

    def document(self) -> dict:
        import torch

        # Read, never imported here: this runs on the report's thread too, and
        # a run that has not compiled yet has not imported Dynamo.
        dynamo_utils = sys.modules.get("torch._dynamo.utils")
        compile_s, graphs = 0.0, 0
        if dynamo_utils is not None:
            compile_s = float(sum(dynamo_utils.compilation_time_metrics.get("_compile.compile_inner", [])))
            graphs = int(dynamo_utils.counters["stats"].get("unique_graphs", 0))
        with self._lock:
            hits, misses = list(self.hits), list(self.misses)
            recompiles, breaks = list(self.recompiles), list(self.graph_breaks)
        per_graph = compile_s / graphs if graphs else 0.0
        # Imported by the compile, if any; never imported on this thread.
        triton_version = getattr(sys.modules.get("triton"), "__version__", None)
        return {
            "schema": 1,
            "namespace": self._session.settings.namespace,
            "run": self.run,
            "rank": self.rank,
            "job": os.environ.get("KCACHE_JOB_NAME") or os.path.basename(os.sys.argv[0] if os.sys.argv else ""),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "torch": torch.__version__,
            "triton": triton_version,
            "started_ms": self.started_ms,
            "updated_ms": int(time.time() * 1000),
            "totals": {
                "graphs_compiled": graphs,
                "compile_seconds": compile_s,
                "hits": len(hits),
                "misses": len(misses),
                "recompiles": len(recompiles),
                "graph_breaks": len(breaks),
                # Estimated: a hit saves what this process's graphs took on average.
                "seconds_saved_by_hits": per_graph * len(hits),
            },
            "hits": hits,
            "misses": misses,
            "recompiles": recompiles,
            "graph_breaks": breaks,
            "roi": self._roi(compile_s),
        }

    def put(self) -> bool:
        client = self._session.client
        errors_before = client.errors
        try:
            stored = client.put_run_report(self._session.settings.namespace, self.run, self.rank, self.document())
        except Exception as e:  # noqa: BLE001 - a report never fails the run
            stored, client.last_error = False, str(e)
        if client.errors != errors_before and client.last_status in (
            Status.ERR_UNAVAILABLE,
            Status.ERR_TIMEOUT,
        ):
            # kcached did not answer: the session's outage, logged once per
            # change of state with every other call's, not once more here.
            self._session.events.observe(True, client.last_error)
            return False
        if not stored and not self._put_failed:
            self._put_failed = True
            _log.warning("kcache: cannot store the run report: %s", self._session.client.last_error)
        return stored

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.put()
