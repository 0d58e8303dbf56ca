"""torch.compile start-up through remote caches, each phase a fresh process.

    compile_cache_bench.py models [--models resnet50,mlp] [--json FILE]
    compile_cache_bench.py ranks [--ranks 4] [--json FILE]
    compile_cache_bench.py phase MODEL REMOTE     (one process; used by the two above)

Needs a GPU, a redis-server at $TORCHINDUCTOR_REDIS_HOST:$TORCHINDUCTOR_REDIS_PORT
(PyTorch's built-in remote cache, the anchor) and kcached at $KCACHE_URL.

For each model, the phases (Inductor's and Triton's local cache dirs as named):
  cold, Redis on       empty dirs B; fills Redis
  fresh node, Redis    empty dirs C: PyTorch's Redis remote cache
  cold, kcache on      empty dirs A; fills kcache
  warm, same node      dirs A again: local hits, the anchor
  fresh node, kcache   empty dirs D: kcache.torch
  cold, kcache+bundles empty dirs F, KCACHE_TORCH_BUNDLES=1: compiles with
                       caching_precompile and puts its Mega-Cache bundle
  fresh node, bundles  empty dirs G: loads that bundle, skips Dynamo tracing
  warm, PyTorch alone  (--pytorch-warm) dirs H, filled by a cold run without any
                       remote cache: the job restarted on its own warm node with
                       PyTorch's local caches only (no kcache in the process)
"first step ready" is the first compiled step's wall time (compile + run);
"less tracing" is that time without Dynamo's bytecode tracing (its
`bytecode_tracing` timer): the same work on every node that traces, which
no cache changes and which moves by 30% between runs of one phase on a busy
host, so this column shows what the caches change without that noise
(a bundle run that skips tracing shows its whole first step);
"whole process" also counts starting Python, importing torch, building the
model and its eager reference. Ratios are warm-same-node / phase, so a fresh
node through kcache at >= 1.0x is no slower than a local warm start. The warm
and fresh-node phases run --repeat times, alternating; the table shows the
median. Every run checks its output with eager. With --json FILE each run
is also appended to FILE.runs.jsonl as it ends (a call stopped by a time
limit keeps its runs).

ranks: N processes cold-start the GPT-2 step together, each with its own empty
dirs (N fresh nodes), once through Redis and once through kcache: wall time
until all are ready, CPU-seconds the machine spent, and how many FX graphs
were compiled (Inductor's FX-graph cache misses that led to a compile). Then
the reference, each process alone and without a remote cache: one cold rank
and N-1 warm-node starts from its dirs; the storm's goal is to cost no more
CPU-seconds than that sum (the all-ready column of the reference row is the
sum of its runs, which ran one after another).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT_AT = time.time()  # in a phase's process: its Python is up (the parent spawned it before)

REMOTE_SWITCHES = {
    "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1",
    "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "1",
    "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_REMOTE_PGO": "1",
}
# The caches kcache.torch.enable() switches on. Not the bundled autotune
# cache (torch 2.11 asserts in it), and not Triton's RedisRemoteCacheBackend: in Triton 3.6 it reads
# knobs.cache.redis, which no longer exists, and fails every compile.


# ---------------------------------------------------------------- one phase


def run_phase(model_name: str, remote: str) -> dict:
    # Registered first, so it runs after every exit handler torch and kcache add.
    atexit.register(lambda: print(f"bench-exit: {time.time()}", file=sys.stderr, flush=True))
    started = time.monotonic()
    import torch
    from torch._dynamo.utils import counters

    sys.path.insert(0, str(HERE))
    import models

    marks = {"import_torch_s": time.monotonic() - started}
    if remote == "kcache":
        import kcache.torch

        kcache.torch.enable()  # $KCACHE_URL, $KCACHE_NAMESPACE
    elif remote == "none":
        import torch._functorch.config
        import torch._inductor.config

        torch._inductor.config.fx_graph_remote_cache = False
        torch._inductor.config.autotune_remote_cache = False
        torch._inductor.config.bundled_autotune_remote_cache = False
        torch._functorch.config.enable_remote_autograd_cache = False

    marks["enable_s"] = time.monotonic() - started - marks["import_torch_s"]
    workload = models.build(model_name, "cuda")
    want = models.eager_reference(workload)
    torch.cuda.synchronize()
    imported_s = time.monotonic() - started

    profile_to = os.environ.get("KCACHE_BENCH_PROFILE")  # a .prof file: cProfile of the first step
    profiler = None
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0 = time.monotonic()
    compiled = torch.compile(workload.module, **workload.compile_kwargs)
    got = workload.step(compiled)
    torch.cuda.synchronize()
    ready_s = time.monotonic() - t0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    error = models.max_relative_error(got, want)
    try:
        from torch._dynamo.utils import compile_times

        headers, values = compile_times(repr="csv", aggregate=True)
        marks["compile_times"] = dict(zip(headers, values))
    except Exception as e:  # a profile aid, not a result: never fail the phase
        marks["compile_times"] = {"error": repr(e)}

    times = []
    for _ in range(10):
        t = time.monotonic()
        workload.step(compiled)
        torch.cuda.synchronize()
        times.append(time.monotonic() - t)
    result = {
        "model": model_name,
        "remote": remote,
        "ready_s": ready_s,
        "ready_at": time.time(),
        "setup_s": imported_s,
        "step_ms": sorted(times)[len(times) // 2] * 1000,
        "max_rel_error": error,
        "correct": error <= workload.tolerance,
        "marks": marks,
        "inductor": {k: v for k, v in counters["inductor"].items() if "cache" in k},
        "aot_autograd": {k: v for k, v in counters["aot_autograd"].items() if "cache" in k},
        "dynamo_cache": dict(counters["dynamo_cache"]),
        "frames": counters["frames"].get("total", 0),  # frames Dynamo traced
    }
    if remote == "kcache":
        import kcache.torch

        result["kcache"] = kcache.torch.stats()
    result["cpu_own_s"], result["cpu_children_s"] = cpu_of_this_process_tree()
    result["script_at"] = SCRIPT_AT
    result["result_at"] = time.time()
    return result


def cpu_of_this_process_tree() -> tuple[float, float]:
    """CPU seconds so far of this process, and of its descendants (Inductor's
    compile workers): the live ones from /proc, the ended ones from rusage."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (state) on
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    me, live = os.getpid(), 0.0
    for pid, seconds in cpu.items():
        up, hops = parent.get(pid), 0
        while up not in (None, 0, 1, me) and hops < 64:
            up, hops = parent.get(up), hops + 1
        if up == me and pid != me:
            live += seconds
    return own.ru_utime + own.ru_stime, live + ended.ru_utime + ended.ru_stime


def phase_env(remote: str, dirs: Path, rank: int | None = None, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.update(extra or {})
    env["TORCHINDUCTOR_CACHE_DIR"] = str(dirs / "inductor")
    env["TRITON_CACHE_DIR"] = str(dirs / "triton")
    env["PYTHONUNBUFFERED"] = "1"
    if remote == "redis":
        env.update(REMOTE_SWITCHES)
    if rank is not None:
        env["RANK"] = str(rank)
    return env


def spawn_phase(
    model: str, remote: str, dirs: Path, rank: int | None = None, extra: dict | None = None
) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "phase", model, remote],
        env=phase_env(remote, dirs, rank, extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen, label: str) -> dict:
    out, err = proc.communicate()
    if proc.returncode != 0:
        sys.stderr.write(err[-6000:])
        raise SystemExit(f"{label}: exit {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    marks = [line[line.index("bench-exit: ") :] for line in err.splitlines() if "bench-exit: " in line]
    if marks:
        result["handlers_done_at"] = float(marks[-1].split()[1])
    return result


PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def all_cores_jiffies() -> dict[str, int]:
    """/proc/stat's first line, all cores together (guest time is inside user
    and nice already; steal is the hypervisor's, not this host's work)."""
    values = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return {name: int(v) for name, v in zip(PROC_STAT_FIELDS, values)}


def busy_cores() -> tuple[float, float]:
    """(busy, total) jiffies of all cores."""
    j = all_cores_jiffies()
    busy = j["user"] + j["nice"] + j["system"] + j["irq"] + j["softirq"]
    return busy, busy + j["idle"] + j["iowait"] + j["steal"]


def wait_for_quiet(busy_below: float = 0.05, longest_s: float = 30.0) -> float:
    """Waits until the host's cores were under busy_below busy for half a
    second (what the previous phase left running: its compile workers, its
    teardown, kcached's or redis-server's work on its writes), at most
    longest_s; returns the seconds waited. Phases alternate in a fixed
    order, so whatever one leaves running would always slow the same next
    one."""
    start = time.monotonic()
    while time.monotonic() - start < longest_s:
        b0, t0 = busy_cores()
        time.sleep(0.5)
        b1, t1 = busy_cores()
        if t1 > t0 and (b1 - b0) / (t1 - t0) < busy_below:
            break
    return time.monotonic() - start


def run_one_phase(model: str, remote: str, dirs: Path, label: str, extra: dict | None = None) -> dict:
    quiet_s = wait_for_quiet()
    t, spawned_at = time.monotonic(), time.time()
    result = finish(spawn_phase(model, remote, dirs, extra=extra), label)
    result["process_s"] = time.monotonic() - t
    # Where the rest of the process goes: Python's start, then (after the
    # first step, the ten timed steps and the result) the exit handlers that
    # torch and the remote cache registered, then the interpreter's teardown
    # (until the child's pipes close: any process still holding them counts).
    ended_at = time.time()
    result["start_s"] = result["script_at"] - spawned_at
    done = result.get("handlers_done_at", ended_at)
    result["exit_handlers_s"] = done - result["result_at"]
    result["teardown_s"] = ended_at - done
    result["quiet_wait_s"] = quiet_s
    result["tracing_s"] = tracing_s(result)
    result["beyond_tracing_s"] = result["ready_s"] - result["tracing_s"]
    result["phase"] = label
    result["env"] = extra or {}
    hits = result["inductor"].get("fxgraph_cache_hit", 0)
    misses = result["inductor"].get("fxgraph_cache_miss", 0)
    ks = result.get("kcache", {})
    trips = {k[len("requests.") :]: v for k, v in ks.items() if k.startswith("requests.")}
    trip_ms = sum(v for k, v in ks.items() if k.startswith("request_ms."))
    print(
        f"  {label:<28} ready {result['ready_s']:7.2f} s  (tracing {result['tracing_s']:5.2f} s)  "
        f"process {result['process_s']:6.2f} s  "
        f"setup {result['setup_s']:5.2f} s  (after {quiet_s:4.1f} s to quiet)  start {result['start_s']:4.2f} s  "
        f"exit handlers {result['exit_handlers_s']:4.2f} s  teardown {result['teardown_s']:4.2f} s  "
        f"FX hits/misses {hits}/{misses}  round trips {trips} {trip_ms:.0f} ms  "
        f"prefetch hits {ks.get('prefetch_hits', 0)}  bundle {bundle_state(result)}  "
        f"frames traced {result.get('frames', '?')}  "
        f"max rel err {result['max_rel_error']:.1e} {'ok' if result['correct'] else 'WRONG'}",
        flush=True,
    )
    return result


def tracing_s(result: dict) -> float:
    """Seconds Dynamo spent tracing bytecode in the first step (all frames)."""
    try:
        return float(result["marks"]["compile_times"].get("bytecode_tracing", 0.0))
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0.0


# ---------------------------------------------------------------- models


def median_of(runs: list[dict]) -> dict:
    """The run with the median ready time, with every run's times kept, and
    the median of the runs' first steps less tracing (of their own: the
    median run by ready time need not be the median one by that)."""
    ordered = sorted(runs, key=lambda r: r["ready_s"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["ready_runs_s"] = [r["ready_s"] for r in runs]
    chosen["process_runs_s"] = [r["process_s"] for r in runs]
    beyond = [r["beyond_tracing_s"] for r in runs]
    chosen["beyond_tracing_runs_s"] = beyond
    chosen["beyond_tracing_s"] = sorted(beyond)[len(beyond) // 2]
    chosen["correct"] = all(r["correct"] for r in runs)
    chosen["bundle_runs"] = [bundle_state(r) for r in runs]
    return chosen


def bundle_state(r: dict) -> str:
    """What a run did with the compile bundle ("-" for a run without bundles)."""
    if "KCACHE_TORCH_BUNDLES" not in r.get("env", {}):
        return "-"
    ks = r.get("kcache", {})
    if ks.get("bundle_hits", 0) > 0:
        # Did Dynamo skip tracing (a precompile hit, no frame traced)?
        skipped = r.get("dynamo_cache", {}).get("dynamo_cache_hit", 0) > 0 and r.get("frames", 1) == 0
        # (A bundled function that serves no call puts a marker at exit, after these stats.)
        return "loaded, no tracing" if skipped else "loaded, traced"
    if ks.get("bundle_unsupported", 0) > 0:
        return "marker: no precompile"  # PyTorch cannot package or serve this model: the fallback
    if ks.get("bundle_refused", 0) > 0:
        return "refused"
    return "not loaded"


NO_PREFETCH = {"KCACHE_TORCH_PREFETCH": "0"}


def bundles_env(name: str) -> dict:
    # Its own run id: the bundle runs' manifest (caching_precompile changes
    # the AOTAutograd entries) stays apart from the prefetch phases' one.
    return {"KCACHE_TORCH_BUNDLES": "1", "KCACHE_RUN_ID": f"bench-bundles-{name}"}


def bench_models(
    names: list[str],
    root: Path,
    repeat: int,
    redis: bool,
    profile_dir: Path | None,
    bundles: bool = True,
    plain_fresh: bool = True,
    prefetch_fresh: bool = True,
    pytorch_warm: bool = False,
    progress=None,
    on_run=None,
) -> list[dict]:
    def phase(*args, **kwargs) -> dict:
        # Each run as it ends: a call stopped by a time limit keeps what it measured.
        result = run_one_phase(*args, **kwargs)
        if on_run is not None:
            on_run(result)
        return result

    rows = []
    for name in names:
        print(f"== {name}", flush=True)
        d = root / name
        results = {}
        use_bundles = bundles
        if redis:
            results["cold, Redis on"] = phase(name, "redis", d / "B", "cold, Redis on")
        results["cold, kcache on"] = phase(name, "kcache", d / "A", "cold, kcache on")
        if pytorch_warm:
            results["cold, PyTorch alone"] = phase(name, "none", d / "H", "cold, PyTorch alone")
        if use_bundles:
            # Where PyTorch's caching precompile fails for a model, say so and go on.
            try:
                label = "cold, kcache+bundles"
                results[label] = phase(name, "kcache", d / "F", label, bundles_env(name))
            except SystemExit as e:
                print(f"  bundles not supported here: {e}", flush=True)
                rows.append({"model": name, "phase": "cold, kcache+bundles", "failed": str(e), "correct": True})
                use_bundles = False
        # The anchor and the goal, `repeat` times each, alternating: the same
        # job restarted on the same node (its settings, its local dirs; the
        # remote-cache switches are part of Inductor's FX key), and a fresh
        # node (new empty dirs each time) through kcache, without and with
        # the run manifest's prefetch (the cold run wrote the manifest).
        warm, redis_fresh, fresh, prefetched, bundled, alone = [], [], [], [], [], []
        for i in range(repeat):
            warm.append(phase(name, "kcache", d / "A", "warm, same node"))
            if pytorch_warm:
                alone.append(phase(name, "none", d / "H", "warm, PyTorch alone"))
            if redis:
                redis_fresh.append(phase(name, "redis", d / f"C{i}", "fresh node, Redis"))
            if plain_fresh:
                fresh.append(phase(name, "kcache", d / f"D{i}", "fresh node, kcache", NO_PREFETCH))
            if prefetch_fresh:
                prefetched.append(phase(name, "kcache", d / f"E{i}", "fresh node, kcache+prefetch"))
            if use_bundles:
                bundled.append(phase(name, "kcache", d / f"G{i}", "fresh node, kcache+bundles", bundles_env(name)))
        results["warm, same node"] = median_of(warm)
        if pytorch_warm:
            results["warm, PyTorch alone"] = median_of(alone)
        if redis:
            results["fresh node, Redis"] = median_of(redis_fresh)
        if plain_fresh:
            results["fresh node, kcache"] = median_of(fresh)
        if prefetch_fresh:
            results["fresh node, kcache+prefetch"] = median_of(prefetched)
        if use_bundles:
            results["fresh node, kcache+bundles"] = median_of(bundled)
        if profile_dir is not None:
            # One more round under cProfile (slower: its times are not in the table).
            profile_dir.mkdir(parents=True, exist_ok=True)
            profiled = [
                ("warm", d / "A", {}),
                ("fresh", d / "P1", NO_PREFETCH),
                ("fresh-prefetch", d / "P2", {}),
            ]
            for tag, dirs, extra in profiled:
                out = profile_dir / f"{name}-{tag}.prof"
                r = phase(name, "kcache", dirs, f"profiled {tag}", {**extra, "KCACHE_BENCH_PROFILE": str(out)})
                (profile_dir / f"{name}-{tag}.json").write_text(json.dumps(r, indent=1))
        anchor = results["warm, same node"]
        for label, r in results.items():  # (a failed phase is already in rows, without times)
            r["vs_warm"] = anchor["ready_s"] / r["ready_s"]
            r["beyond_tracing_vs_warm"] = anchor["beyond_tracing_s"] / r["beyond_tracing_s"]
            r["process_vs_warm"] = anchor["process_s"] / r["process_s"]
            rows.append(r)
        # A model's rows as soon as it is done: a run stopped by a time limit keeps them.
        print_models_table([r for r in rows if r["model"] == name])
        if pytorch_warm:
            alone = results["warm, PyTorch alone"]
            print(
                "  against PyTorch's own warm node, first step (less tracing): "
                + ", ".join(
                    f"{label}: {alone['ready_s'] / r['ready_s']:.2f}x "
                    f"({alone['beyond_tracing_s'] / r['beyond_tracing_s']:.2f}x)"
                    for label, r in results.items()
                    if label.startswith("fresh")
                ),
                flush=True,
            )
        if progress is not None:
            progress(rows)
    return rows


def print_models_table(rows: list[dict]) -> None:
    print()
    print(
        "| model | phase | first step ready | vs warm | less tracing | vs warm | whole process | vs warm "
        "| FX hits/misses | AOT hits | bundle | step | correct |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "failed" in r:
            print(f"| {r['model']} | {r['phase']} | failed: {r['failed']} | | | | | | | | | | |")
            continue
        fx = f"{r['inductor'].get('fxgraph_cache_hit', 0)}/{r['inductor'].get('fxgraph_cache_miss', 0)}"
        aot = r["aot_autograd"].get("autograd_cache_hit", 0)
        states = r.get("bundle_runs") or [bundle_state(r)]
        bundle = states[0] if len(set(states)) == 1 else "; ".join(states)
        runs = r.get("ready_runs_s")
        spread = f" (of {', '.join(f'{t:.2f}' for t in runs)})" if runs and len(runs) > 1 else ""
        beyond = r.get("beyond_tracing_runs_s")
        beyond_spread = f" (of {', '.join(f'{t:.2f}' for t in beyond)})" if beyond and len(beyond) > 1 else ""
        print(
            f"| {r['model']} | {r['phase']} | {r['ready_s']:.2f} s{spread} | {r['vs_warm']:.2f}x "
            f"| {r['beyond_tracing_s']:.2f} s{beyond_spread} | {r['beyond_tracing_vs_warm']:.2f}x "
            f"| {r['process_s']:.1f} s | {r['process_vs_warm']:.2f}x | {fx} | {aot} | "
            f"{bundle} | {r['step_ms']:.2f} ms | {'yes' if r['correct'] else 'NO'} ({r['max_rel_error']:.1e}) |"
        )


# ---------------------------------------------------------------- ranks


def cpu_seconds() -> float:
    """CPU time the whole machine has spent (user + system), from /proc/stat."""
    j = all_cores_jiffies()
    return (j["user"] + j["nice"] + j["system"]) / os.sysconf("SC_CLK_TCK")


def bench_ranks(n: int, root: Path, redis: bool = True, namespace: str | None = None) -> list[dict]:
    rows = []
    for remote in ("redis", "kcache") if redis else ("kcache",):
        print(f"== {n} ranks, GPT-2 step, through {remote}", flush=True)
        extra = {"KCACHE_NAMESPACE": namespace} if namespace else None
        cpu0, start = cpu_seconds(), time.time()
        procs = [
            spawn_phase("gpt2", remote, root / f"ranks-{remote}" / f"rank{i}", rank=i, extra=extra) for i in range(n)
        ]
        results = []
        for i, p in enumerate(procs):
            results.append(finish(p, f"rank {i}"))
        cpu = cpu_seconds() - cpu0
        for i, r in enumerate(results):
            ks = r.get("kcache", {})
            print(
                f"  rank {i}: {r['cpu_own_s']:5.1f} CPU-s itself + {r['cpu_children_s']:5.1f} its compile "
                f"workers, until ready and the timed steps; import {r['marks']['import_torch_s']:.1f} s, "
                f"setup {r['setup_s']:.1f} s, first step {r['ready_s']:.1f} s; FX misses "
                f"{r['inductor'].get('fxgraph_cache_miss', 0)}, lease waits {ks.get('lease_waits', 0)}",
                flush=True,
            )
        misses = sum(r["inductor"].get("fxgraph_cache_miss", 0) for r in results)
        hits = sum(r["inductor"].get("fxgraph_cache_hit", 0) for r in results)
        row = {
            "remote": remote,
            "ranks": n,
            "all_ready_s": max(r["ready_at"] for r in results) - start,
            "cpu_s": cpu,
            "fx_misses": misses,
            "fx_hits": hits,
            "fx_graphs_per_rank": (misses + hits) / n,
            "correct": all(r["correct"] for r in results),
            "per_rank": results,
        }
        if remote == "kcache":
            row["lease_waits"] = sum(r["kcache"].get("lease_waits", 0) for r in results)
            row["hits_after_wait"] = sum(r["kcache"].get("hits_after_wait", 0) for r in results)
        print(
            f"  all ready in {row['all_ready_s']:.1f} s, {cpu:.0f} CPU-s, FX graphs compiled {misses} "
            f"(hits {hits}), correct {row['correct']}",
            flush=True,
        )
        rows.append(row)
    rows.append(bench_ranks_reference(n, root))
    return rows


def warm_up_machine(n: int) -> None:
    """n processes that do what a rank does before torch.compile (import
    torch, Dynamo and Inductor, build GPT-2 on the GPU, one eager step),
    thrown away: the first processes on an idle machine pay for its start
    (seen on the H100: every rank of a call's first storm set up in 17-21 s
    and spent 29-34 CPU-s, against 11-14 s and 26-30 in its second), which
    would be charged to whichever storm or reference ran first."""
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import torch, torch._dynamo, torch._inductor.compile_fx, models\n"
        "w = models.build('gpt2', 'cuda'); w.step(w.module); torch.cuda.synchronize()\n"
    ) % str(Path(__file__).resolve().parent)
    started = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    failed = False
    for p in procs:
        try:
            failed |= p.wait(timeout=max(1.0, 300 - (time.monotonic() - started))) != 0
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            failed = True
    print(f"machine warmed up by {n} processes in {time.monotonic() - started:.1f} s{' (some failed)' if failed else ''}", flush=True)


def bench_ranks_reference(n: int, root: Path) -> dict:
    """Issue 16's yardstick for a storm of n ranks: what one cold rank plus n-1
    warm-node starts cost when each runs alone (no remote cache, own dirs; the
    warm starts reuse the cold rank's dirs). Same machine, same run."""
    print(f"== reference: 1 cold rank + {n - 1} warm-node starts, each alone", flush=True)
    dirs = root / "ranks-reference"
    runs = []
    for i in range(n):
        label = "cold, alone" if i == 0 else f"warm same node {i}"
        cpu0, start = cpu_seconds(), time.time()
        result = finish(spawn_phase("gpt2", "none", dirs), label)
        cpu = cpu_seconds() - cpu0
        runs.append({"label": label, "cpu_s": cpu, "ready_s": result["ready_at"] - start,
                     "correct": result["correct"],
                     "fx_misses": result["inductor"].get("fxgraph_cache_miss", 0),
                     "cpu_own_s": result["cpu_own_s"], "cpu_children_s": result["cpu_children_s"]})
        print(
            f"  {label:<20} {cpu:5.0f} CPU-s, ready in {runs[-1]['ready_s']:.1f} s "
            f"({result['cpu_own_s']:.1f} itself + {result['cpu_children_s']:.1f} its compile workers "
            f"until ready and the timed steps)",
            flush=True,
        )
    return {
        "remote": f"reference (1 cold + {n - 1} warm)",
        "ranks": n,
        # Run one after another: the sum is what the reference costs, not a wall time of a storm.
        "all_ready_s": sum(r["ready_s"] for r in runs),
        "cpu_s": sum(r["cpu_s"] for r in runs),
        "fx_misses": sum(r["fx_misses"] for r in runs),
        "fx_graphs_per_rank": runs[0]["fx_misses"],
        "correct": all(r["correct"] for r in runs),
        "per_run": runs,
    }


def print_ranks_table(rows: list[dict]) -> None:
    base = rows[0]
    print()
    print("| remote cache | ranks | all ready | CPU-seconds | FX graphs compiled (per rank) | correct |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['remote']} | {r['ranks']} | {r['all_ready_s']:.1f} s ({base['all_ready_s'] / r['all_ready_s']:.2f}x) "
            f"| {r['cpu_s']:.0f} ({base['cpu_s'] / r['cpu_s']:.2f}x) | {r['fx_misses']} "
            f"({r['fx_graphs_per_rank']:.0f}) | {'yes' if r['correct'] else 'NO'} |"
        )
    reference = rows[-1]
    for r in rows[:-1]:
        verdict = "met" if r["cpu_s"] <= reference["cpu_s"] else "not met"
        print(
            f"{r['remote']}: {r['cpu_s']:.0f} CPU-s for the storm vs {reference['cpu_s']:.0f} for "
            f"{reference['remote']} ({r['cpu_s'] / reference['cpu_s']:.2f}x): goal {verdict}"
        )


def flush_redis() -> None:
    import redis  # redis-py, which PyTorch's Redis cache needs too

    host = os.environ.get("TORCHINDUCTOR_REDIS_HOST", "127.0.0.1")
    port = int(os.environ.get("TORCHINDUCTOR_REDIS_PORT", "6379"))
    redis.Redis(host=host, port=port).flushall()


def print_ranks_medians(rows: list[dict]) -> None:
    """Each storm's CPU-seconds against its own reference, then the median of
    those ratios with every storm shown."""
    storms = sorted({r["storm"] for r in rows})
    print()
    print("| remote cache | storms | CPU-seconds, each storm | all ready, each storm | vs reference, each storm | median |")
    print("|---|---|---|---|---|---|")
    for remote in dict.fromkeys(r["remote"] for r in rows):
        cpu, ready, ratio = [], [], []
        for i in storms:
            mine = [r for r in rows if r["storm"] == i and r["remote"] == remote]
            ref = [r for r in rows if r["storm"] == i and r["remote"].startswith("reference")]
            if not mine or not ref:
                continue
            cpu.append(mine[0]["cpu_s"])
            ready.append(mine[0]["all_ready_s"])
            ratio.append(mine[0]["cpu_s"] / ref[0]["cpu_s"])
        med = sorted(ratio)[len(ratio) // 2]
        print(
            f"| {remote} | {len(cpu)} | {', '.join(f'{c:.0f}' for c in cpu)} | "
            f"{', '.join(f'{t:.1f} s' for t in ready)} | {', '.join(f'{x:.2f}x' for x in ratio)} | {med:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("phase")
    p.add_argument("model")
    p.add_argument("remote", choices=["none", "redis", "kcache"])
    m = sub.add_parser("models")
    m.add_argument("--models", default="resnet50,gpt2,mlp")
    m.add_argument("--repeat", type=int, default=3, help="runs of the warm and fresh-node phases")
    m.add_argument("--json")
    m.add_argument("--no-redis", action="store_true", help="skip the PyTorch Redis phases")
    m.add_argument("--profile-dir", help="one more round under cProfile; .prof and .json per phase here")
    m.add_argument("--no-bundles", action="store_true", help="skip the Mega-Cache bundle phases")
    m.add_argument("--no-plain-fresh", action="store_true", help="skip the fresh-node phase without prefetch")
    m.add_argument("--no-prefetch-fresh", action="store_true", help="skip the fresh-node phase with prefetch only")
    m.add_argument(
        "--pytorch-warm", action="store_true", help="also the warm node with PyTorch's local caches alone (no kcache)"
    )
    r = sub.add_parser("ranks")
    r.add_argument("--ranks", type=int, default=4)
    r.add_argument("--repeat", type=int, default=1, help="storms, each cold (its own namespace and dirs)")
    r.add_argument("--no-redis", action="store_true", help="skip the storm through PyTorch's Redis cache")
    r.add_argument("--json")
    args = parser.parse_args()

    if args.command == "phase":
        print(json.dumps(run_phase(args.model, args.remote)))
        return
    root = Path(tempfile.mkdtemp(prefix="kcache-torch-bench-"))

    def save(rows: list[dict]) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))

    def save_run(result: dict) -> None:  # one line per run, beside --json
        if args.json:
            with open(f"{args.json}.runs.jsonl", "a") as f:
                f.write(json.dumps(result) + "\n")

    if args.json:  # this call's runs only, not an earlier call's with the same FILE
        Path(f"{args.json}.runs.jsonl").unlink(missing_ok=True)

    try:
        if args.command == "models":
            profile_dir = Path(args.profile_dir) if args.profile_dir else None
            rows = bench_models(
                args.models.split(","),
                root,
                args.repeat,
                not args.no_redis,
                profile_dir,
                bundles=not args.no_bundles,
                plain_fresh=not args.no_plain_fresh,
                prefetch_fresh=not args.no_prefetch_fresh,
                pytorch_warm=args.pytorch_warm,
                progress=save,
                on_run=save_run,
            )
            print_models_table(rows)
        else:
            warm_up_machine(args.ranks)
            rows = []
            for i in range(args.repeat):
                # Every storm cold: its own namespace in kcache, Redis emptied, new dirs.
                if not args.no_redis:
                    flush_redis()
                storm = bench_ranks(args.ranks, root / f"storm{i}", not args.no_redis, f"bench-storm-{os.getpid()}-{i}")
                for r in storm:
                    r["storm"] = i
                print_ranks_table(storm)
                rows += storm
                save(rows)
            if args.repeat > 1:
                print_ranks_medians(rows)
        save(rows)
        if not all(r["correct"] for r in rows):
            raise SystemExit("some compiled outputs differ from eager")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
