"""kcache.torch.compile(async_compile=True) against eager and torch.compile,
each phase a fresh process with empty local Inductor/Triton dirs.

    async_compile_bench.py jobs [--models gpt2_train,resnet50] [--steps 200] [--repeat 1] [--json FILE]
    async_compile_bench.py recompiles [--json FILE]   forced recompiles and the run report that names them
    async_compile_bench.py phase MODEL KIND STEPS     (one process; used by jobs)

KIND, per run (the namespace is new for every run):
  eager    the job without torch.compile
  compile  torch.compile, no remote cache (a cold start of plain PyTorch)
  async    kcache.torch.compile(async_compile=True), kcache empty: eager steps
           while a child compiles into kcache, then a warm load and compiled
           steps; after the job it waits for the child (not counted) so the
           cache is full for the next phase
  warm     kcache.torch.compile() (synchronous) on a fresh node: everything
           from kcache
first_step_s and total_s are measured from the phase's start (Python started,
torch not yet imported) to the end of the first / last step (synchronized).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STARTED = time.monotonic()
HERE = Path(__file__).resolve().parent


def workload(name: str):
    """(module, one step as a function of the module to call)."""
    import torch

    torch.manual_seed(0)
    if name == "gpt2_train":
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(config).cuda().train()
        ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(m):
            opt.zero_grad(set_to_none=True)
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            return loss

        return model, step
    if name == "resnet50":
        import torchvision

        model = torchvision.models.resnet50(weights=None).cuda().eval()
        x = torch.randn(32, 3, 224, 224, device="cuda")

        def step(m):
            with torch.no_grad():
                return m(x)

        return model, step
    raise SystemExit(f"unknown model {name}")


def run_phase(model_name: str, kind: str, steps: int) -> dict:
    import torch
    from torch._dynamo.utils import counters

    if kind in ("async", "warm"):
        import kcache.torch

        kcache.torch.enable()  # $KCACHE_URL, $KCACHE_NAMESPACE
    model, step = workload(model_name)
    if kind == "eager":
        run = model
    elif kind == "compile":
        run = torch.compile(model)
    else:
        run = kcache.torch.compile(model, async_compile=(kind == "async"))
    times, first_step_s = [], None
    for i in range(steps):
        t = time.monotonic()
        step(run)
        torch.cuda.synchronize()
        times.append(time.monotonic() - t)
        if i == 0:
            first_step_s = time.monotonic() - STARTED
    total_s = time.monotonic() - STARTED
    result = {
        "model": model_name,
        "kind": kind,
        "steps": steps,
        "first_step_s": first_step_s,
        "total_s": total_s,
        "first_step_only_s": times[0],
        "max_step_s": max(times),
        "last_step_ms": statistics.median(times[-20:]) * 1000,
        "fx_hits": counters["inductor"].get("fxgraph_cache_hit", 0),
        "fx_misses": counters["inductor"].get("fxgraph_cache_miss", 0),
    }
    if kind == "async":
        result.update(
            state=run.state,
            failure=run.failure,
            switched_at_step=run.switched_at_call,
            switch_step_s=run.switch_seconds,
            warm_load_misses=run.warm_load_misses,
            eager_step_ms=statistics.median(times[1 : (run.switched_at_call or steps) - 1] or times) * 1000,
        )
        t = time.monotonic()
        result["after_job"] = run.wait()
        result["child_s"] = run.child_seconds
        result["waited_after_job_s"] = time.monotonic() - t
    if kind in ("async", "warm"):
        result["kcache"] = {k: v for k, v in kcache.torch.stats().items() if not k.startswith("request")}
    return result


def phase(model: str, kind: str, steps: int, root: Path, namespace: str) -> dict:
    env = dict(os.environ)
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(root / "inductor"),
        TRITON_CACHE_DIR=str(root / "triton"),
        KCACHE_NAMESPACE=namespace,
        PYTHONUNBUFFERED="1",
    )
    t = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "phase", model, kind, str(steps)],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        return {"model": model, "kind": kind, "error": f"exit {proc.returncode}"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_s"] = time.monotonic() - t
    extra = ""
    if kind == "async":
        extra = (
            f"  state {result['state']} switched at step {result['switched_at_step']} "
            f"(that step {result['switch_step_s'] or 0:.2f} s, {result['warm_load_misses']} FX misses)  "
            f"eager step {result['eager_step_ms']:.0f} ms  child {result['child_s'] or 0:.1f} s "
            f"(waited {result['waited_after_job_s']:.1f} s after the job)"
        )
    print(
        f"  {model:<11} {kind:<8} first step {result['first_step_s']:7.2f} s  total {result['total_s']:7.2f} s  "
        f"max step {result['max_step_s']:6.2f} s  last steps {result['last_step_ms']:6.1f} ms  "
        f"FX hits/misses {result['fx_hits']}/{result['fx_misses']}{extra}",
        flush=True,
    )
    return result


def jobs(models: list[str], steps: int, repeat: int, out: Path | None) -> None:
    rows = []
    with tempfile.TemporaryDirectory(prefix="kcache-async-bench-") as tmp:
        for model in models:
            for r in range(repeat):
                namespace = f"async-{model}-{os.getpid()}-{r}"
                for kind in ("eager", "compile", "async", "warm"):
                    rows.append(phase(model, kind, steps, Path(tmp) / f"{model}-{r}-{kind}", namespace))
                    if out:
                        out.write_text(json.dumps(rows, indent=1))
    print("\nmedians (every run above):")
    for model in models:
        for kind in ("eager", "compile", "async", "warm"):
            got = [x for x in rows if x["model"] == model and x["kind"] == kind and "error" not in x]
            if got:
                print(
                    f"  {model:<11} {kind:<8} first step {statistics.median(x['first_step_s'] for x in got):7.2f} s  "
                    f"total {statistics.median(x['total_s'] for x in got):7.2f} s  (runs: "
                    + ", ".join(f"{x['first_step_s']:.2f}/{x['total_s']:.2f}" for x in got)
                    + ")"
                )


RECOMPILE_BATCHES = (8, 16, 32, 24)


def recompile_phase() -> dict:
    """ResNet-50 inference compiled with dynamic=False, called with a new batch
    size each time: every call after the first recompiles. The run report is
    put at exit; the parent reads it from kcached."""
    import torch

    import kcache.torch

    kcache.torch.enable()  # $KCACHE_URL, $KCACHE_NAMESPACE, $KCACHE_RUN_ID; reports on
    model, _ = workload("resnet50")
    compiled = torch.compile(model, dynamic=False)
    errors = []
    with torch.no_grad():
        for batch in RECOMPILE_BATCHES:
            x = torch.randn(batch, 3, 224, 224, device="cuda")
            want = model(x)
            # Relative to the output's scale: an untrained ResNet's logits are
            # large, and Inductor's convolutions round differently from eager's.
            errors.append(float((compiled(x) - want).abs().max() / want.abs().max()))
    return {"batches": list(RECOMPILE_BATCHES), "max_rel_error": max(errors), "correct": max(errors) < 1e-2}


def recompiles(out: Path | None) -> None:
    from kcache import Client

    namespace, run = f"recompiles-{os.getpid()}", f"recompiles-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="kcache-recompiles-") as tmp:
        env = dict(os.environ)
        env.update(
            TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
            TRITON_CACHE_DIR=f"{tmp}/triton",
            KCACHE_NAMESPACE=namespace,
            KCACHE_RUN_ID=run,
            KCACHE_TORCH_REPORT="1",
            PYTHONUNBUFFERED="1",
        )
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "phase-recompiles"], env=env, capture_output=True, text=True
        )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        raise SystemExit(f"the recompiling job failed: exit {proc.returncode}")
    job = json.loads(proc.stdout.strip().splitlines()[-1])
    found = Client(os.environ["KCACHE_URL"]).run(namespace, run)
    reports = list((found or {}).get("reports", {}).values())
    if not reports:
        raise SystemExit(f"no run report for {namespace}/{run}")
    report = reports[0]
    print(f"job: batches {job['batches']} through torch.compile(dynamic=False), outputs match eager: {job['correct']} (max error {job['max_rel_error']:.1e} of the largest output)")
    print(f"report {namespace}/{run}: totals {json.dumps(report['totals'])}")
    for item in report["recompiles"]:
        print(f"  recompile  {item['what']}: {item['reason']}")
    for item in report["misses"]:
        print(f"  miss       {item['what'][:40]}: {item.get('reason', '')}")
    if out:
        out.write_text(json.dumps({"job": job, "report": report}, indent=1))
    expected = len(RECOMPILE_BATCHES) - 1
    verdict = "every recompile is in the report" if len(report["recompiles"]) >= expected else "recompiles missing"
    print(f"{len(report['recompiles'])} recompiles reported, {expected} forced: {verdict}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "phase":
        print(json.dumps(run_phase(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "phase-recompiles":
        print(json.dumps(recompile_phase()))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["jobs", "recompiles"])
    parser.add_argument("--models", default="gpt2_train,resnet50")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.mode == "recompiles":
        recompiles(args.json)
        return
    jobs(args.models.split(","), args.steps, args.repeat, args.json)


if __name__ == "__main__":
    main()
