"""The compile report of a run (issue 20): a CPU run with a cache miss, a
recompile and a graph break names all three with their reasons, and
`kcache run NS/RUN --json` returns it."""

import json
import os
import subprocess
import sys
from pathlib import Path

from torch_support import require_torch

require_torch()

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]


def kcache_cli(url: str, *args: str) -> subprocess.CompletedProcess:
    cli = os.environ.get("KCACHE_CLI") or str(REPO / "build" / "release" / "client" / "kcache")
    return subprocess.run([cli, "--url", url, *args], capture_output=True, text=True, timeout=60)


def test_the_report_names_a_miss_a_recompile_and_a_graph_break_with_reasons(daemon, tmp_path):
    env = dict(os.environ)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "client" / "python"), env.get("PYTHONPATH")]))
    env.pop("RANK", None)
    child = subprocess.run(
        [sys.executable, str(HERE / "torch_report_child.py"), daemon.url, "report-ci"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-4000:]

    shown = kcache_cli(daemon.url, "--json", "run", "ci/report-ci")
    assert shown.returncode == 0, shown.stderr
    reports = json.loads(shown.stdout)["reports"]
    assert len(reports) == 1
    report = next(iter(reports.values()))
    totals = report["totals"]
    assert totals["misses"] >= 1 and totals["recompiles"] >= 1 and totals["graph_breaks"] >= 1, totals
    assert all(m["reason"] for m in report["misses"])
    assert any("size" in r["reason"] or "shape" in r["reason"] for r in report["recompiles"]), report["recompiles"]
    assert any("print" in b["reason"] for b in report["graph_breaks"]), report["graph_breaks"]
    assert report["run"] == "report-ci" and report["namespace"] == "ci"
    assert report["roi"] is not None and report["roi"]["eager_step_s"] > 0

    listed = kcache_cli(daemon.url, "--json", "runs", "--namespace", "ci")
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)["runs"]
    assert runs[0]["run"] == "report-ci" and runs[0]["recompiles"] >= 1

    text = kcache_cli(daemon.url, "run", "ci/report-ci").stdout
    assert "recompiles:" in text and "graph breaks:" in text and "misses:" in text, text
