"""max-autotune through kcached on a GPU host, end to end (issue 19, part 1).

Run by `scripts/device/gpu_service_autotune.sh run` with the binaries that
`prepare` carried into .device/gpu_service: kcached with GPU workers
(the CUDA-only kcache-worker), every step through the `kcache` CLI:

  1. each template's search, exhaustive then halving, submitted with
     `kcache submit` and followed with `kcache jobs watch`; its published
     winner fetched (`kcache get`), its tuning table read (`kcache show`);
  2. each exhaustive winner launched on its own and checked against a float64
     torch reference; the vendor kernel (cuBLAS SGEMM, torch.sum) timed;
  3. the SGEMM search submitted again: a hit (no job, nothing compiled);
  4. kcached restarted on the same data: still a hit;
  5. kcached restarted as a node of another tuning class (--tuning-class, the
     label a node benchmarks under): the search runs again, benchmarks, and
     compiles nothing (its variants are in the cache).

Every expectation that fails is listed and makes the exit status 1. The
table (and results.json) is rewritten under --out after every step, so a run
cut short still leaves what it measured.

--no-gpu checks the script itself on a machine without a GPU: kcached is given
a tuning class, the variants compile, every benchmark fails (no CUDA driver),
and the checks that need a winner are skipped.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / ".device" / "gpu_service"
# name -> (search file, benchmark shapes that replace the file's, or None).
# wgmma and bf16-mma are the bf16 tensor-core GEMMs (issue 19 part 2), at the
# file's 4096^3 and at the skinny and small shapes the issue asks for.
TEMPLATES = {
    "sgemm": (ROOT / "bench/autotune/gemm_search.json", None),
    "rowsum": (ROOT / "bench/autotune/rowsum_search.json", None),
    "wgmma": (ROOT / "bench/autotune/gemm_wgmma_search.json", None),
    "wgmma-skinny": (ROOT / "bench/autotune/gemm_wgmma_search.json", {"M": 8192, "N": 1024, "K": 8192}),
    "wgmma-small": (ROOT / "bench/autotune/gemm_wgmma_search.json", {"M": 1024, "N": 1024, "K": 1024}),
    "bf16-mma": (ROOT / "bench/autotune/gemm_tc_search.json", None),
}
STRATEGIES = {"exhaustive": {"kind": "exhaustive"}, "halving": {"kind": "halving"}}


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Fatal(Exception):
    """A step after which nothing else can run."""


def tail(path, lines=40):
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"({path}: {e})"


class Kcached:
    """One kcached on a free port; its data directory outlives restarts."""

    def __init__(self, work, env, workers):
        self.work, self.env, self.workers = work, env, workers
        self.proc, self.url, self.log_path, self.starts = None, None, None, 0

    def start(self, extra=()):
        self.starts += 1
        self.log_path = self.work / f"kcached-{self.starts}.log"
        port_file = self.work / "port"
        port_file.unlink(missing_ok=True)
        cmd = [str(PACK / "bin/kcached"), "--listen", "127.0.0.1:0", "--port-file",
               str(port_file), "--data-dir", str(self.work / "data"), "--workers",
               str(self.workers), "--worker-binary", str(PACK / "bin/kcache-worker"),
               "--log-level", "info",
               # a search's benchmark is one worker run: give it room
               "--compile-timeout-s", "1200", "--compile-cpu-time-s", "1200", *extra]
        log("start: " + " ".join(cmd[1:]))
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + 120
        while time.time() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
                log(f"kcached up at {self.url} (log {self.log_path})")
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise Fatal(f"kcached did not start (exit {self.proc.returncode}):\n"
                    + tail(self.log_path))

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            log("kcached did not stop in 60 s after SIGTERM: killing it")
            self.proc.kill()
            self.proc.wait(timeout=30)

    def compiles(self):
        """Compiles run by workers since this kcached started (every result)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        return int(sum(float(m) for m in re.findall(
            r'^kcache_compiles_total\{[^}]*\} ([0-9.e+]+)$', text, re.M)))


class Run:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="gpu-service-"))
        (self.work / "specs").mkdir()
        # kcache's processes get the carried libraries and the host's CUDA;
        # PyTorch (gpu_kernel_check.py) keeps its own environment.
        libs = os.environ.get("KCACHE_GPU_SERVICE_LIBS", str(PACK / "lib"))
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = ":".join(
            p for p in (libs, os.environ.get("LD_LIBRARY_PATH", "")) if p)
        self.kcached = Kcached(self.work, self.env, args.workers)
        self.rows, self.failures, self.facts = [], [], {}

    # --- the kcache CLI -------------------------------------------------
    def cli(self, args, timeout=120, json_out=True, check=True):
        cmd = [str(PACK / "bin/kcache"), "--url", self.kcached.url, "--timeout-ms", "60000"]
        cmd += (["--json"] if json_out else []) + [str(a) for a in args]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env)
        except subprocess.TimeoutExpired:
            raise Fatal(f"`kcache {' '.join(map(str, args))}` took over {timeout} s")
        if check and r.returncode != 0:
            raise Fatal(f"`kcache {' '.join(map(str, args))}` exited {r.returncode}:\n"
                        f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
        if not json_out:
            return r
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError:
            raise Fatal(f"`kcache {' '.join(map(str, args))}`: not JSON:\n{r.stdout[-2000:]}"
                        f"{r.stderr[-2000:]}")

    def searches(self):
        """The ids of the search jobs kcached lists (of its 1000 kept)."""
        return {j["id"] for j in self.cli(["jobs", "--limit", "100000"])["jobs"]
                if j.get("kind") == "autotune"}

    def expect(self, ok, what):
        log(("ok: " if ok else "FAILED: ") + what)
        if not ok:
            self.failures.append(what)

    # --- one search -----------------------------------------------------
    def spec_file(self, template, strategy, seed=None):
        path, shapes = TEMPLATES[template]
        spec = json.loads(path.read_text())
        src = spec["source"]
        if "file" in src:  # bench/autotune/ names its kernel's file: inline it
            src["text"] = (path.parent / src.pop("file")).read_text()
        if shapes:  # another problem size: another search (the shapes are in its key)
            spec["autotune"]["benchmark"]["shapes"] = shapes
        spec["autotune"]["strategy"] = dict(STRATEGIES[strategy])
        if seed is not None:  # read by random-k only, but part of the search's key
            spec["autotune"]["strategy"]["seed"] = seed
        path = self.work / "specs" / f"{template}-{strategy}{'' if seed is None else f'-{seed}'}.json"
        path.write_text(json.dumps(spec))
        return path

    def search(self, template, strategy, label, seed=None):
        """Submits, watches, reads the outcome; returns the table row."""
        spec = self.spec_file(template, strategy, seed)
        compiles0, searches0 = self.kcached.compiles(), self.searches()
        log(f"== {label}: kcache submit {spec.name}")
        t0 = time.time()
        answer = self.cli(["submit", spec])
        row = {"search": template, "strategy": strategy, "label": label,
               "status": answer.get("status"), "key": None, "variants": None, "pruned": None,
               "compiled": None, "timed_runs": None, "search_s": None, "wall_s": None,
               "winner": None, "winner_us": None, "tuning_class": None}
        job = answer.get("job")
        log(f"submit: {answer.get('status')}: {answer.get('message', '')}")
        if job and job.get("state") not in ("succeeded", "failed", "cancelled"):
            # Progress, a line per change: into a file, its last line shown.
            watch = [str(PACK / "bin/kcache"), "--url", self.kcached.url, "jobs", "watch",
                     "--interval-ms", "1000"]
            watched = self.out / f"watch-{template}-{strategy}-{label.replace(' ', '_')}.txt"
            try:
                with open(watched, "w") as progress:
                    subprocess.run(watch, stdout=progress, stderr=subprocess.STDOUT,
                                   timeout=self.args.search_timeout, env=self.env)
            except subprocess.TimeoutExpired:
                self.cli(["cancel", job["id"]], check=False)
                raise Fatal(f"{label}: the search did not finish in {self.args.search_timeout} s"
                            "\n" + tail(watched, 5) + "\n" + tail(self.kcached.log_path))
            log(f"kcache jobs watch ({watched.name}): {tail(watched, 1)}")
            job = self.finished(job["id"], t0 + self.args.search_timeout)
        row["wall_s"] = round(time.time() - t0, 2)
        row["compiled"] = self.kcached.compiles() - compiles0
        row["new_jobs"] = len(self.searches() - searches0)
        if job:
            row["job"] = job["id"]
            row["state"] = job.get("state")
            row["tuning_class"] = job.get("tuning_class")
            row["key"] = (job.get("keys") or [job.get("compile_key")])[0]
            if job.get("error"):
                row["error"] = job["error"].get("message", "")
                log(f"job {job['id']} {job.get('state')}: {row['error']}")
        self.rows.append(row)
        return row, job

    def finished(self, job_id, deadline):
        """The job once it has finished (`kcache job --wait`, a long poll)."""
        while True:
            job = self.cli(["job", job_id, "--wait", "30"], timeout=120, check=False)
            if job.get("state") in ("succeeded", "failed", "cancelled"):
                return job
            if time.time() > deadline:
                self.cli(["cancel", job_id], check=False)
                raise Fatal(f"job {job_id} still {job.get('state')} at the deadline\n"
                            + tail(self.kcached.log_path))

    def read_table(self, row):
        """The published winner and its tuning table, through the CLI."""
        entry = self.cli(["show", row["key"]])
        meta = entry.get("metadata", {})
        table = json.loads(meta["autotune_table"])
        rows = table["rows"]
        row.update({
            "variants": sum(r["status"] != "pruned" for r in rows),
            "pruned": sum(r["status"] == "pruned" for r in rows),
            "timed_runs": table.get("timed_runs"), "search_s": table.get("bench_seconds"),
            "round_s": table.get("round_seconds"), "bench_workers": table.get("bench_workers"),
            "winner": table.get("winner"), "tuning_class": meta.get("tuning_class"),
            "statuses": {s: sum(r["status"] == s for r in rows) for s in {r["status"] for r in rows}},
        })
        times = {r["id"]: r.get("median_us", 0.0) for r in rows}
        row["winner_us"] = times.get(table.get("winner"))
        row["times"] = times
        row["params"] = json.loads(meta.get("autotune_params", "{}"))
        human = self.cli(["show", row["key"]], json_out=False).stdout
        name = f"{row['search']}-{row['strategy']}-{row['label'].replace(' ', '_')}"
        (self.out / f"{name}.show.txt").write_text(human)
        log(f"kcache show {row['key']}: tuning table in {name}.show.txt; its head:")
        lines = human.splitlines()
        start = next((i for i, l in enumerate(lines) if l.startswith("autotune:")), 0)
        print("\n".join(lines[start:start + 6]), flush=True)
        # An autotune entry has two outputs (kernel.cubin, autotune.json):
        # `kcache get -o` writes them into a directory.
        outputs = self.work / f"{name}.outputs"
        self.cli(["get", row["key"], "-o", outputs], json_out=False)
        cubins = sorted(outputs.glob("*.cubin")) if outputs.is_dir() else [outputs]
        if not cubins:
            raise SystemExit(f"kcache get {row['key']}: no .cubin among {sorted(outputs.iterdir())}")
        cubin = cubins[0]
        row["cubin"] = str(cubin)
        row["cubin_bytes"] = cubin.stat().st_size
        log(f"kcache get: the winner {row['winner']}, {row['cubin_bytes']} B of CUBIN")
        return row

    # --- checks outside kcache ------------------------------------------
    def torch_check(self, mode, *args):
        cmd = [sys.executable, str(ROOT / "scripts/device/gpu_kernel_check.py"), mode,
               *map(str, args)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            return None, "timed out after 300 s"
        out = r.stdout.strip().splitlines()
        try:
            return json.loads(out[-1]), "" if r.returncode == 0 else f"exit {r.returncode}"
        except (IndexError, json.JSONDecodeError):
            return None, f"exit {r.returncode}: {r.stdout[-1500:]}{r.stderr[-1500:]}"

    # --- output ---------------------------------------------------------
    def write(self):
        (self.out / "results.json").write_text(json.dumps(
            {"facts": self.facts, "rows": self.rows, "failures": self.failures}, indent=1,
            default=str))
        (self.out / "table.md").write_text(self.table())

    def table(self):
        ex = {(r["search"], r["label"]): r for r in self.rows
              if r["strategy"] == "exhaustive" and r.get("winner")}
        lines = ["| search | strategy | step | tuning class | variants | pruned | compiled | "
                 "timed runs | search s | rounds s | bench workers | job wall s | winner | "
                 "winner us | vs exhaustive: search time | vs exhaustive: winner time | vs vendor |",
                 "|" + "---|" * 17]
        ratios = {}

        def fmt(v, spec="{}"):
            return "-" if v is None else spec.format(v)

        for r in self.rows:
            base = ex.get((r["search"], r["label"]))
            s_ratio = w_ratio = vendor = None
            if base and r.get("winner") and r.get("search_s") is not None:
                s_ratio = r["search_s"] / base["search_s"] if base["search_s"] else None
                if r["strategy"] == "halving" and s_ratio is not None:
                    ratios.setdefault(r["search"], []).append(s_ratio)
                best = base["times"].get(base["winner"])
                mine = base["times"].get(r["winner"])
                w_ratio = mine / best if best and mine else None
            v = self.facts.get(f"vendor_{r['search']}")
            if v and r.get("winner_us"):
                vendor = f"{r['winner_us'] / v['median_us']:.2f}x {v['vendor'].split(' (')[0]}"
            status = r["status"] if r["status"] not in ("queued", "joined") else r.get("state")
            lines.append("| " + " | ".join([
                r["search"], r["strategy"], f"{r['label']} ({status})",
                fmt(r.get("tuning_class")), fmt(r.get("variants")), fmt(r.get("pruned")),
                fmt(r.get("compiled")), fmt(r.get("timed_runs")), fmt(r.get("search_s"), "{:.2f}"),
                fmt(r.get("round_s") and ", ".join(f"{x:.2f}" for x in r["round_s"])),
                fmt(r.get("bench_workers")),
                fmt(r.get("wall_s"), "{:.1f}"), fmt(r.get("winner")),
                fmt(r.get("winner_us"), "{:.1f}"), fmt(s_ratio, "{:.2f}x"),
                fmt(w_ratio, "{:.3f}x"), fmt(vendor)]) + " |")
        for search, rs in ratios.items():
            lines.append(f"\n{search}: halving / exhaustive search time, median of {len(rs)}: "
                         f"{statistics.median(rs):.2f}x (runs: "
                         + ", ".join(f"{x:.2f}x" for x in rs) + ")")
        for key, v in sorted(self.facts.items()):
            if key.startswith("vendor_"):
                lines.append(f"\n{v['vendor']} on {v['device']}: {v['median_us']:.1f} us "
                             f"(median of {v['runs']}, torch {v['torch']})")
            if key.startswith("verify_"):
                lines.append(f"\n{key}: {json.dumps(v)}")
        return "\n".join(lines) + "\n"

    # --- the steps ------------------------------------------------------
    def steps(self):
        a = self.args
        extra = ["--tuning-class", "no-gpu-check"] if a.no_gpu else []
        if a.bench_gpus:
            extra += ["--bench-gpus", a.bench_gpus]
        self.kcached.start(extra)
        first = {}
        for template in a.templates:
            for strategy in ("exhaustive", "halving"):
                row, _ = self.search(template, strategy, "cold")
                if a.no_gpu:
                    self.expect(row.get("state") == "failed",
                                f"{template} {strategy} (no GPU): the search fails at its "
                                f"benchmark ({row.get('error', row.get('state'))})")
                else:
                    self.expect(row.get("state") == "succeeded",
                                f"{template} {strategy}: the search succeeded "
                                f"({row.get('state')} {row.get('error', '')})")
                    if row.get("state") == "succeeded":
                        self.read_table(row)
                if strategy == "exhaustive":
                    first[template] = row
                    # Another shape of a kernel searched before: its variants'
                    # compiles do not depend on the shapes, so they all hit.
                    earlier = [t for t in first if t != template and TEMPLATES[t][0] == TEMPLATES[template][0]]
                    if earlier:
                        self.expect(row["compiled"] == 0,
                                    f"{template} exhaustive, cold: compiled nothing, its variants "
                                    f"are {earlier[0]}'s ({row['compiled']} compiles)")
                    else:
                        self.expect(row["compiled"] > 0,
                                    f"{template} exhaustive, cold: compiled its variants "
                                    f"({row['compiled']} compiles)")
                else:
                    self.expect(row["compiled"] == 0,
                                f"{template} halving after exhaustive: compiled nothing "
                                f"({row['compiled']} compiles)")
                    base = first[template]
                    if row.get("timed_runs") is not None and base.get("timed_runs"):
                        self.expect(row["timed_runs"] < base["timed_runs"],
                                    f"{template} halving: fewer timed runs than exhaustive "
                                    f"({row['timed_runs']} < {base['timed_runs']})")
                self.write()
            if not a.no_gpu and first[template].get("winner"):
                self.verify(template, first[template])
                self.write()
            # More runs of the pair for medians: a seed makes each a search of
            # its own (benchmarked afresh, compiling nothing).
            for seed in range(2, a.repeat + 1):
                for strategy in ("exhaustive", "halving"):
                    row, _ = self.search(template, strategy, f"run {seed}", seed)
                    if row.get("state") == "succeeded" and not a.no_gpu:
                        self.read_table(row)
                    self.expect(row["compiled"] == 0, f"{template} {strategy} run {seed}: "
                                f"compiled nothing ({row['compiled']} compiles)")
                    self.write()

        sgemm = "sgemm" if "sgemm" in a.templates else a.templates[0]
        self.hit(sgemm, "again")
        self.write()
        self.kcached.stop()
        self.kcached.start(extra)
        self.hit(sgemm, "after restart")
        self.write()
        self.kcached.stop()
        other = (first[sgemm].get("tuning_class") or "no-gpu-check") + "+other-class"
        self.kcached.start(["--tuning-class", other])
        row, _ = self.search(sgemm, "exhaustive", "other class")
        self.expect(row["compiled"] == 0,
                    f"another tuning class: compiled nothing ({row['compiled']} compiles)")
        self.expect(row.get("tuning_class") == other and row.get("key") != first[sgemm].get("key"),
                    f"another tuning class: a search of its own ({row.get('tuning_class')}, "
                    f"key {row.get('key')})")
        if a.no_gpu:
            self.expect(row.get("state") == "failed",
                        "another tuning class (no GPU): benchmarked again and failed there")
        else:
            self.expect(row.get("state") == "succeeded", "another tuning class: succeeded")
            if row.get("state") == "succeeded":
                self.read_table(row)
                self.expect((row.get("timed_runs") or 0) > 0,
                            f"another tuning class: re-benchmarked ({row.get('timed_runs')} "
                            "timed runs)")
        self.write()

    def hit(self, template, label):
        row, job = self.search(template, "exhaustive", label)
        if self.args.no_gpu:
            # A failed search publishes nothing: a resubmit is a new search,
            # which must still compile nothing.
            self.expect(row["compiled"] == 0,
                        f"{template} {label} (no GPU): compiled nothing ({row['compiled']})")
            return
        row["timed_runs"], row["variants"] = 0, None
        self.expect(row["status"] == "cached" and job is None and row["new_jobs"] == 0,
                    f"{template} {label}: a hit, no job ({row['status']}, "
                    f"{row['new_jobs']} new search jobs)")
        self.expect(row["compiled"] == 0, f"{template} {label}: compiled nothing "
                    f"({row['compiled']})")

    def verify(self, template, row):
        params = self.work / f"{template}.params.json"
        params.write_text(json.dumps(row["params"]))
        # The search as submitted (its shapes), not the file it came from.
        search = self.spec_file(template, "exhaustive")
        checked, why = self.torch_check("verify", search, row["cubin"], params)
        self.facts[f"verify_{template}"] = checked or why
        self.expect(bool(checked) and checked.get("ok"),
                    f"{template}: the published winner {row['winner']} launched on its own "
                    f"matches the float64 reference ({checked or why})")
        vendor, why = self.torch_check("vendor", search)
        if vendor:
            self.facts[f"vendor_{template}"] = vendor
            log(f"{vendor['vendor']}: {vendor['median_us']:.1f} us; winner "
                f"{row['winner_us']:.1f} us ({row['winner_us'] / vendor['median_us']:.2f}x)")
        else:
            self.expect(False, f"{template}: timing the vendor kernel ({why})")

    def main(self):
        log(f"work directory {self.work}, results in {self.out}")
        try:
            self.steps()
        except Fatal as e:
            self.failures.append(str(e).splitlines()[0])
            log(f"FATAL: {e}")
            if self.kcached.log_path:
                log(f"the last of {self.kcached.log_path}:\n" + tail(self.kcached.log_path))
        finally:
            self.kcached.stop()
            self.write()
        print("\n" + self.table(), flush=True)
        for f in self.failures:
            print(f"FAILED: {f}")
        if not self.failures:
            print("every expectation held")
        return 1 if self.failures else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT") or "gpu_service_out",
                   help="where table.md, results.json and the tuning tables go ($OUT)")
    p.add_argument("--templates", default="sgemm,rowsum",
                   help=f"comma-separated, of {', '.join(TEMPLATES)} (default: sgemm,rowsum)")
    p.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 2),
                   help="kcached's compile workers (default: the cores, at most 16)")
    p.add_argument("--search-timeout", type=int, default=420,
                   help="seconds one search may take, compiles and benchmark (default 420)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of each exhaustive/halving pair (the table gives the median ratio)")
    p.add_argument("--bench-gpus", default="",
                   help="kcached --bench-gpus: GPUs timing a search at once (0,0 runs two "
                        "bench workers on one GPU, a check of the split)")
    p.add_argument("--no-gpu", action="store_true",
                   help="check the script without a GPU (every benchmark fails)")
    args = p.parse_args()
    args.templates = [t for t in args.templates.split(",") if t]
    unknown = [t for t in args.templates if t not in TEMPLATES]
    if unknown or not args.templates:
        p.error(f"--templates: unknown {unknown} (valid: {', '.join(TEMPLATES)})")
    return Run(args).main()


if __name__ == "__main__":
    sys.exit(main())
