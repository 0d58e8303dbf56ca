"""kcache.torch.compile(model, async_compile=True): eager first, compiled later.

The first steps run eager while a separate process compiles the same module
through kcache (a thread would share the trainer's GIL and Dynamo's locks and
stall its steps). That child gets the module from `factory` (a picklable
callable that builds it) or, without one, a copy of the trainer's module whose
parameters are left on the meta device (its structure and buffers only: a
large model's weights are not written out), and example inputs shaped like
the first call's. It runs one forward, plus a backward when the trainer
trains (grad enabled and an output requiring grad), under torch.compile with
the same kwargs and Inductor/Dynamo/functorch configs, so every FX graph,
AOTAutograd and Triton entry of that compile is put in kcache.

When the child exits 0, the wrapper compiles the trainer's own module (the
optimizer's parameters stay the same objects) between two steps: a warm load
whose first call hits kcache. A failing child (non-zero exit, timeout, no
pickle) leaves the job eager, with one WARNING on logger "kcache".

Ranks share one background compile through a kcache lease on a key of the
model, inputs, kwargs and configs: the rank granted the lease starts the
child and, when it succeeds, puts a small marker entry (which ends the
lease); the others poll the lease (once per `poll_s`) and warm-load as soon
as the marker is there, or start their own child if the holder let go.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import json
import logging
import os
import pickle
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

import torch
from torch.utils import _pytree as pytree

from . import _keys
from ._leases import LeaseKeeper

logger = logging.getLogger("kcache")

_PRODUCER = "kcache.torch (async compile)"
# Configs the child copies from the trainer: a setting changed in code (not
# through the environment) changes the graph keys.
_CONFIGS = ("torch._inductor.config", "torch._dynamo.config", "torch._functorch.config")


class AsyncCompiled:
    """Calls the module eager until its compile is in kcache, then compiled.

    state: "eager" (before the first call), "compiling" (a child or another
    rank compiles), "compiled", "failed" (eager for good; `failure` says why).
    """

    def __init__(
        self,
        module: torch.nn.Module,
        compile_kwargs: dict,
        factory: Optional[Callable[[], torch.nn.Module]] = None,
        timeout_s: float = 3600.0,
        poll_s: float = 1.0,
    ):
        self.module = module
        self.compile_kwargs = dict(compile_kwargs)
        self.factory = factory
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.state = "eager"
        self.failure: Optional[str] = None
        self.compiled_by: Optional[str] = None  # "self" (our child) or "peer" (another rank's)
        self.calls = 0
        self.switched_at_call: Optional[int] = None  # the call that ran compiled first
        self.switch_seconds: Optional[float] = None  # that call's wall time (warm load included)
        self.warm_load_misses: Optional[int] = None  # FX-graph misses in that call: 0 is a clean warm load
        self.child_seconds: Optional[float] = None
        self._compiled: Optional[Callable] = None
        self._child: Optional[subprocess.Popen] = None
        self._child_started = 0.0
        self._workdir: Optional[tempfile.TemporaryDirectory] = None
        self._lease_key: Optional[str] = None
        self._spec: Optional[dict] = None
        self._next_poll = 0.0
        self._ready = False
        self._holding = False  # this process holds the compile's lease

    def __getattr__(self, name: str):
        # Only reached for names the wrapper lacks: the module's own.
        return getattr(self.__dict__["module"], name)

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self._compiled is not None:
            return self._compiled(*args, **kwargs)
        if self.state == "compiling":
            self._poll()
        if self._ready:
            return self._switch(args, kwargs)
        out = self.module(*args, **kwargs)
        if self.state == "eager":
            self._start(args, kwargs, out)
        return out

    # The first call: what to compile, and who compiles it.

    def _start(self, args, kwargs, out) -> None:
        self.state = "compiling"
        try:
            training = torch.is_grad_enabled() and any(
                isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves(out)
            )
            self._spec = {
                "inputs": pytree.tree_map(_input_spec, (args, kwargs)),
                "training": training,
                "module_training": self.module.training,
                "kwargs": self.compile_kwargs,
                # Only the configs this process imported: one it never imported
                # holds its defaults and the environment, which the child
                # inherits; importing Inductor's here would cost the trainer's
                # first step seconds (see kcache.torch.enable).
                "configs": {name: sys.modules[name].save_config() for name in _CONFIGS if name in sys.modules},
                "sys_path": list(sys.path),
                "tensors": _tensor_signature(self.module),
                "device": str(_device_of(self.module, args, kwargs)),
            }
            self._lease_key = self._key()
        except Exception as e:  # noqa: BLE001  (fail open: the job goes on eager)
            self._fail(f"could not describe the first call ({type(e).__name__}: {e})")
            return
        self._poll(first=True)

    def _key(self) -> str:
        from . import _bundle_header, _session_or_none

        session = _session_or_none()
        namespace = session.settings.namespace if session is not None else "default"
        spec = {k: v for k, v in self._spec.items() if k not in ("sys_path", "configs")}
        text = json.dumps(
            {
                "signature": _bundle_header.signature(self.module, self.compile_kwargs, imported_configs_only=True),
                "spec": spec,
                "factory": _qualname(self.factory),
                "torch": torch.__version__,
            },
            sort_keys=True,
            default=str,
        )
        return _keys._bounded(
            f"torch:{namespace}:async-compile:{hashlib.sha256(text.encode()).hexdigest()[:40]}", f"torch:{namespace}"
        )

    def _poll(self, first: bool = False) -> None:
        if self._ready:  # the entries are in: the next call switches
            return
        if self._child is not None:
            self._poll_child()
            return
        now = time.monotonic()
        if not first and now < self._next_poll:
            return
        self._next_poll = now + self.poll_s
        from . import _session_or_none

        session = _session_or_none()
        state = session.acquire(self._lease_key) if session is not None else LeaseKeeper.GRANTED
        if state == LeaseKeeper.CACHED:
            self.compiled_by = self.compiled_by or "peer"
            self._ready = True
        elif state == LeaseKeeper.GRANTED:
            self._holding = session is not None
            self._spawn()
        # HELD: another rank's child compiles; ask again at a later step.

    def _spawn(self) -> None:
        try:
            self._workdir = tempfile.TemporaryDirectory(prefix="kcache-async-")
            spec_path = Path(self._workdir.name) / "spec.pt"
            job = dict(self._spec)
            if self.factory is not None:
                job["factory"] = self.factory
            else:
                job["module"] = _skeleton(self.module)
            # The trainer's import path first, in a file of its own: unpickling
            # the factory or the module's classes needs it.
            where = {"sys_path": job.pop("sys_path"), "main": getattr(sys.modules["__main__"], "__file__", None)}
            (Path(self._workdir.name) / "where.json").write_text(json.dumps(where))
            torch.save(job, spec_path, pickle_protocol=pickle.HIGHEST_PROTOCOL)
            log = open(Path(self._workdir.name) / "child.log", "wb")
            with log:
                self._child = subprocess.Popen(
                    [sys.executable, "-m", __name__, str(spec_path)],
                    env=_child_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            self._child_started = time.monotonic()
            self.compiled_by = "self"
            atexit.register(_close_at_exit, weakref.ref(self))
        except Exception as e:  # noqa: BLE001  (fail open)
            hint = "; the compile kwargs must pickle"
            if self.factory is None:
                hint += ", and the module, or pass factory="
            self._fail(f"could not start the background compile ({type(e).__name__}: {e}{hint})")

    def _poll_child(self) -> None:
        code = self._child.poll()
        elapsed = time.monotonic() - self._child_started
        if code is None:
            if elapsed > self.timeout_s:
                self._child.kill()
                self._child.wait()
                self._fail(f"the background compile took more than {self.timeout_s:.0f} s")
            return
        self.child_seconds = elapsed
        if code != 0:
            self._fail(f"the background compile exited with {code}: {self._child_log_tail()}")
            return
        from . import _session_or_none

        session = _session_or_none()
        if session is not None:
            marker = json.dumps({"seconds": round(elapsed, 3), "by": _who_compiled()}).encode()
            stored = session.put(self._lease_key, marker, {"torch_cache": "async-compile"}, _PRODUCER)
            session.done(self._lease_key, stored)
        self._holding = False
        self._child = None
        self._cleanup()
        self._ready = True

    # The switch: a warm load of the trainer's own module, between two steps.

    def _switch(self, args, kwargs):
        from torch._dynamo.utils import counters

        misses = counters["inductor"]["fxgraph_cache_miss"]
        started = time.perf_counter()
        try:
            compiled = torch.compile(self.module, **self.compile_kwargs)
            out = compiled(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (fail open: this call and the next run eager)
            self._ready = False
            self._fail(f"the warm load failed ({type(e).__name__}: {e})")
            return self.module(*args, **kwargs)
        self.switch_seconds = time.perf_counter() - started
        self.warm_load_misses = counters["inductor"]["fxgraph_cache_miss"] - misses
        self._compiled = compiled
        self.switched_at_call = self.calls
        self.state = "compiled"
        logger.info(
            "kcache.torch.compile: compiled from the cache at call %d in %.2f s (%s, %d FX-graph misses)",
            self.calls,
            self.switch_seconds,
            "compiled here" if self.compiled_by == "self" else "compiled by another rank",
            self.warm_load_misses,
        )
        return out

    def wait(self, timeout_s: Optional[float] = None) -> str:
        """Waits for the background compile (ours, or another rank's) to end
        and returns the state: at the end of a job shorter than its compile,
        so the entries are in kcache for the next run. The switch itself
        still happens at the next call."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while self.state == "compiling" and not self._ready and time.monotonic() < deadline:
            if self._child is not None:
                try:
                    self._child.wait(timeout=max(0.0, min(1.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    pass
            else:
                time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))
            self._poll()
        return "ready" if self._ready else self.state

    def close(self) -> None:
        """Stops a background compile still running (also at exit): a job
        that ends does not leave a process behind."""
        child = self.__dict__.get("_child")
        if child is not None and child.poll() is None:
            child.kill()
            child.wait()
        self._child = None
        if "_workdir" in self.__dict__:
            self._cleanup()

    def _fail(self, why: str) -> None:
        from kcache._failopen import _who

        self.state = "failed"
        self.failure = why
        if self._holding:
            from . import _session_or_none

            session = _session_or_none()
            if session is not None:
                session.done(self._lease_key, False)  # let another rank try
            self._holding = False
        self._child = None
        self._cleanup()
        logger.warning("%s: async compile: %s; the job goes on eager", _who(), why)

    def _child_log_tail(self, limit: int = 2000) -> str:
        try:
            text = (Path(self._workdir.name) / "child.log").read_text(errors="replace").strip()
        except (OSError, AttributeError):
            return "no output"
        lines = [line for line in text.splitlines() if line.strip()]
        return (" | ".join(lines[-3:]) if lines else "no output")[-limit:]

    def _cleanup(self) -> None:
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __del__(self):
        self.close()


def _close_at_exit(ref: "weakref.ref[AsyncCompiled]") -> None:
    wrapper = ref()
    if wrapper is not None:
        wrapper.close()


def _input_spec(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return {
            "tensor": True,
            "shape": list(x.shape),
            "stride": list(x.stride()),
            "dtype": str(x.dtype).removeprefix("torch."),
            "device": str(x.device),
            "requires_grad": x.requires_grad,
        }
    return x


def _example(spec: Any) -> Any:
    if not (isinstance(spec, dict) and spec.get("tensor") is True):
        return spec
    dtype = getattr(torch, spec["dtype"])
    shape, device = spec["shape"], spec["device"]
    # Zeros for integers: token ids and indices stay in range.
    t = torch.randn(shape, dtype=dtype, device=device) if dtype.is_floating_point else torch.zeros(
        shape, dtype=dtype, device=device
    )
    if tuple(t.stride()) != tuple(spec["stride"]):
        t = torch.empty_strided(shape, spec["stride"], dtype=dtype, device=device).copy_(t)
    return t.requires_grad_(spec["requires_grad"])


def _tensor_signature(module: torch.nn.Module) -> list[str]:
    return [
        f"{name}:{tuple(t.shape)}:{t.dtype}:{t.device}:{t.requires_grad}"
        for name, t in [*module.named_parameters(), *module.named_buffers()]
    ]


def _device_of(module: torch.nn.Module, args, kwargs) -> torch.device:
    for t in [*module.parameters(), *pytree.tree_leaves((args, kwargs))]:
        if isinstance(t, torch.Tensor):
            return t.device
    return torch.device("cpu")


def _skeleton(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy whose parameters are on the meta device (shared ones stay
    shared); buffers keep their values: indices and masks live there."""
    memo: dict[int, Any] = {}
    for p in module.parameters():
        memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    return copy.deepcopy(module, memo)


def _materialize(module: torch.nn.Module, device: str) -> None:
    """The skeleton's meta parameters as zeros on `device`; values do not
    change what is compiled."""
    made: dict[int, torch.nn.Parameter] = {}
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            if p is None or not p.is_meta:
                continue
            if id(p) not in made:
                real = torch.zeros(p.shape, dtype=p.dtype, device=device)
                made[id(p)] = torch.nn.Parameter(real, requires_grad=p.requires_grad)
            sub._parameters[name] = made[id(p)]


def _qualname(obj: Any) -> Optional[str]:
    if obj is None:
        return None
    inner = getattr(obj, "func", obj)  # functools.partial
    return f"{getattr(inner, '__module__', '?')}.{getattr(inner, '__qualname__', type(inner).__name__)}"


def _who_compiled() -> str:
    from ._leases import holder_name

    return holder_name()


def _child_env() -> dict:
    env = dict(os.environ)  # enable() exported the session's settings here
    # The child's own session: no run report, bundle or manifest of its own
    # (they would stand for the trainer's run); no autoenable hook.
    env.update(KCACHE_TORCH_REPORT="0", KCACHE_TORCH_BUNDLES="0", KCACHE_TORCH_PREFETCH="0", KCACHE_TORCH="0")
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def spare_cpu_affinity(allowed: set[int], spare: int) -> set[int]:
    """The CPUs the compile process keeps: `allowed` (the trainer's own
    affinity, which the child inherits) less `spare` of them left to the
    trainer. Inductor starts a compile worker per CPU it may use, and at a
    `nice` of 5 a trainer thread sharing a core with one still loses about a
    quarter of it: its eager steps slow down while it waits for the compile.
    Fewer than two CPUs kept: all of `allowed` (nothing to spare)."""
    keep = sorted(allowed)[max(spare, 0) :]
    return set(keep) if len(keep) >= 2 else set(allowed)


def _leave_cpus_to_trainer() -> None:
    """Before Inductor is imported (it sizes its worker pool by our affinity)."""
    if not hasattr(os, "sched_setaffinity"):
        return
    allowed = os.sched_getaffinity(0)
    keep = spare_cpu_affinity(allowed, int(os.environ.get("KCACHE_TORCH_ASYNC_SPARE_CPUS", "2")))
    if keep != allowed:
        try:
            os.sched_setaffinity(0, keep)
        except OSError:
            pass


# The child: python -m kcache.torch._async_compile SPEC


def _child_main(spec_path: str) -> int:
    where = json.loads((Path(spec_path).parent / "where.json").read_text())
    for entry in reversed(where["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        job = torch.load(spec_path, weights_only=False)
    except AttributeError:
        # A class or factory of the trainer's script (pickled as __main__.X):
        # run the script as multiprocessing's spawn does, under another name,
        # so its `if __name__ == "__main__":` part does not run here.
        if not where["main"]:
            raise
        import runpy
        import types

        main = types.ModuleType("__mp_main__")
        main.__dict__.update(runpy.run_path(where["main"], run_name="__mp_main__"))
        sys.modules["__main__"] = sys.modules["__mp_main__"] = main
        job = torch.load(spec_path, weights_only=False)
    try:
        os.nice(int(os.environ.get("KCACHE_TORCH_ASYNC_NICE", "5")))  # the trainer's steps first
    except OSError:
        pass
    _leave_cpus_to_trainer()
    # The module first: a factory that fails does so before kcache and
    # Inductor are imported (seconds of CPU).
    device = job["device"]
    if "factory" in job:
        model = job["factory"]()
        if not isinstance(model, torch.nn.Module):
            print(f"factory returned {type(model).__name__}, not a torch.nn.Module", file=sys.stderr)
            return 4
        model = model.to(device)
    else:
        model = job["module"]
        _materialize(model, device)
    import importlib

    from ._from_env import enable_from_env

    # The trainer's configs first, then enable(): a trainer that imported a
    # config before its hooks went in (they wait for its first torch.compile)
    # saved the remote-cache switches off, and enable() turns them on.
    for name, saved in job["configs"].items():
        importlib.import_module(name).load_config(saved)
    if enable_from_env() is None:
        print("kcache.torch async compile: kcache could not be enabled", file=sys.stderr)
        return 3
    model.train(job["module_training"])
    if _tensor_signature(model) != job["tensors"]:
        mine, theirs = set(_tensor_signature(model)), set(job["tensors"])
        differ = f"{sorted(mine - theirs)[:3]} vs {sorted(theirs - mine)[:3]}"
        print(f"the child's module differs from the trainer's: {differ}", file=sys.stderr)
        return 5
    args, kwargs = pytree.tree_map(_example, job["inputs"], is_leaf=lambda s: isinstance(s, dict) and "tensor" in s)
    started = time.perf_counter()
    compiled = torch.compile(model, **job["kwargs"])
    with torch.set_grad_enabled(job["training"]):
        out = compiled(*args, **kwargs)
        if job["training"]:
            grads = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
            torch.autograd.backward([t.float().sum() for t in grads])
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    from . import stats

    print(json.dumps({"compile_s": round(time.perf_counter() - started, 3), "kcache": stats()}))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
