"""What kcache.torch's run report costs a trainer (issue 20 part 2), on the CPU.

    KCACHE_URL=http://kcached:7070 report_overhead.py [--repeat 3]

Three figures, each from fresh processes with empty local Inductor dirs and
a namespace of their own, report on and off alternating, every run shown:
  per step     kcache.torch.report_step(): microseconds per call
  per compile  a small MLP compiled at four batch sizes with dynamic=False
               (one compile, three recompiles, all misses): the compiles'
               wall time with the report's hooks on vs off
  per put      building the report document and PUTting it: milliseconds
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

BATCHES = (8, 16, 32, 24)


def phase(report: bool) -> dict:
    import torch

    import kcache.torch

    kcache.torch.enable(report=report, prefetch=False, report_interval_s=0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    compiled = torch.compile(model, dynamic=False)
    started = time.perf_counter()
    with torch.no_grad():
        for batch in BATCHES:
            compiled(torch.randn(batch, 64))
    compile_s = time.perf_counter() - started
    out = {"report": report, "compile_s": compile_s}
    calls = 100_000
    started = time.perf_counter()
    for _ in range(calls):
        kcache.torch.report_step(0.01)
    out["report_step_us"] = (time.perf_counter() - started) / calls * 1e6
    session = kcache.torch._session_or_none()
    if report and session is not None and session.report is not None:
        started = time.perf_counter()
        document = session.report.document()
        out["document_ms"] = (time.perf_counter() - started) * 1000
        out["document_bytes"] = len(json.dumps(document))
        out["recompiles"] = len(document["recompiles"])
        started = time.perf_counter()
        out["put_ok"] = session.report.put()
        out["put_ms"] = (time.perf_counter() - started) * 1000
    return out


def run(report: bool, root: Path, i: int) -> dict:
    env = dict(os.environ)
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(root / f"inductor-{i}-{report}"),
        KCACHE_NAMESPACE=f"report-overhead-{os.getpid()}-{i}-{int(report)}",
        KCACHE_RUN_ID=f"report-overhead-{os.getpid()}-{i}",
    )
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "phase", "1" if report else "0"],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"phase exited {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "phase":
        print(json.dumps(phase(sys.argv[2] == "1")))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("KCACHE_URL"):
        raise SystemExit("set KCACHE_URL to a running kcached")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kcache-report-overhead-") as tmp:
        for i in range(args.repeat):
            for report in (True, False):
                row = run(report, Path(tmp), i)
                rows.append(row)
                extra = ""
                if report:
                    extra = (
                        f"  document {row['document_ms']:.2f} ms ({row['document_bytes']} bytes, "
                        f"{row['recompiles']} recompiles)  put {row['put_ms']:.2f} ms (stored: {row['put_ok']})"
                    )
                print(
                    f"  report {'on ' if report else 'off'}  compiles {row['compile_s']:6.2f} s  "
                    f"report_step {row['report_step_us']:.2f} us{extra}",
                    flush=True,
                )
    on = [r for r in rows if r["report"]]
    off = [r for r in rows if not r["report"]]
    on_s, off_s = statistics.median(r["compile_s"] for r in on), statistics.median(r["compile_s"] for r in off)
    print("\nmedians (every run above):")
    print(f"  compiles, report on / off: {on_s:.2f} s / {off_s:.2f} s ({on_s / off_s:.3f}x)")
    print(f"  report_step: {statistics.median(r['report_step_us'] for r in on):.2f} us per call")
    print(
        f"  document + put: {statistics.median(r['document_ms'] for r in on):.2f} ms + "
        f"{statistics.median(r['put_ms'] for r in on):.2f} ms, once a minute and at exit"
    )


if __name__ == "__main__":
    main()
