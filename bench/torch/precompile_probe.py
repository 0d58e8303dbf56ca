"""Does PyTorch itself package a workload for caching precompile? No kcache here.

    precompile_probe.py save MODEL BUNDLE    compile with caching_precompile in empty cache
                                             dirs, run one step, save_cache_artifacts -> BUNDLE
    precompile_probe.py load MODEL BUNDLE    empty cache dirs, load_cache_artifacts(BUNDLE),
                                             compile and run one step: did Dynamo trace?
    ... --kcache hooks            the same with kcache.torch's remote-cache hooks in (kcached at
                                  $KCACHE_URL), bundles left to this script: do kcache's hooks
                                  keep PyTorch from packaging what it packages alone?
    ... --kcache hooks-no-triton  the same without kcache's Triton cache manager
    ... --kcache bundles          kcache's own bundle flow (KCACHE_TORCH_BUNDLES=1: kcache saves
                                  at exit, loads in enable()); phase `plain` is a kcache run
                                  without bundles (its FX/AOT entries in kcache first, as in
                                  compile_cache_bench). A second JSON line, printed after every
                                  other exit handler, gives kcache's bundle counters and log.

Each prints one JSON line (what the bundle holds, Dynamo's and AOTAutograd's
counters, the warnings PyTorch logged on the way, the first step's time and
its error against eager), so a workload kcache saves no bundle for can be
told apart: PyTorch's own limit, or kcache's integration. The caller gives
each process its own empty TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class _Collect(logging.Handler):
    """Keeps what PyTorch's cache and package loggers say (at INFO and up)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if len(self.lines) < 200:
            self.lines.append(f"{record.name}: {text[:400]}")


def kcache_stats(mode: str) -> dict:
    if mode == "off":
        return {}
    import kcache.torch

    return {k: v for k, v in kcache.torch.stats().items() if v}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["save", "load", "plain"])
    parser.add_argument("model")
    parser.add_argument("bundle")
    parser.add_argument("--kcache", choices=["off", "hooks", "hooks-no-triton", "bundles"], default="off")
    # phase `plain` without kcache: no caching_precompile (the caller runs `save` in its dirs next,
    # to see whether a warm FX-graph cache lets PyTorch package the compile)
    args = parser.parse_args()
    kcache_flow = args.kcache == "bundles"

    started = time.monotonic()
    collect = _Collect()
    for name in ("torch._dynamo.package", "torch._dynamo.precompile_context",
                 "torch._functorch._aot_autograd.autograd_cache", "torch._inductor.codecache",
                 "torch._dynamo.convert_frame", "torch.compiler._cache", "kcache"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(collect)
    if kcache_flow:
        # Registered first, so it runs last: after kcache's save at exit.
        atexit.register(lambda: print(json.dumps({"after_exit": True, "kcache_stats": kcache_stats("bundles"),
                                                  "log": collect.lines}), flush=True))
        if args.phase != "plain":
            os.environ["KCACHE_TORCH_BUNDLES"] = "1"

    import torch
    import models

    if args.kcache != "off":
        import kcache.torch

        kcache.torch.enable(triton=args.kcache != "hooks-no-triton", defer_hooks=False)

    if not kcache_flow and args.phase != "plain":
        torch._dynamo.config.caching_precompile = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    workload = models.build(args.model, device)
    reference = models.eager_reference(workload)

    loaded = None
    load_s = None
    if args.phase == "load" and not kcache_flow:
        with open(args.bundle, "rb") as f:
            data = f.read()
        load_start = time.monotonic()
        info = torch.compiler.load_cache_artifacts(data)
        load_s = round(time.monotonic() - load_start, 3)
        loaded = {kind: len(keys) for kind, keys in info.artifacts.items()} if info else None

    from torch._dynamo.utils import counters

    compiled = torch.compile(workload.module, **workload.compile_kwargs)
    step_start = time.monotonic()
    got = workload.step(compiled)
    if device == "cuda":
        torch.cuda.synchronize()
    first_step = time.monotonic() - step_start
    error = models.max_relative_error(got, reference)

    saved = None
    if args.phase == "save" and not kcache_flow:
        out = torch.compiler.save_cache_artifacts()
        if out is not None:
            data, info = out
            with open(args.bundle, "wb") as f:
                f.write(data)
            saved = {"bytes": len(data), "artifacts": {k: len(v) for k, v in info.artifacts.items()}}

    print(json.dumps({
        "phase": args.phase,
        "model": args.model,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "load_s": load_s,
        "first_step_s": round(first_step, 3),
        "process_s": round(time.monotonic() - started, 3),
        "max_rel_err": error,
        "correct": error <= workload.tolerance,
        "kcache": args.kcache,
        "kcache_stats": kcache_stats(args.kcache),
        "saved": saved,
        "loaded": loaded,
        "counters": {group: dict(values) for group, values in counters.items()
                     if group in ("dynamo_cache", "frames", "aot_autograd", "inductor", "stats")},
        "log": collect.lines,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
