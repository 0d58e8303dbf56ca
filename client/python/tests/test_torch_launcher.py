"""kcache for a trainer that does not change its code: `python -m
kcache.torch.run train.py` and KCACHE_TORCH=1 through the installed .pth
file, each in fresh processes with empty local cache dirs; and fail-open
events logged once per change of state, not per call."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torch_support import require_torch

require_torch()

import torch  # noqa: E402

from kcache._failopen import FailOpenLog  # noqa: E402

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # client/python: kcache/, _kcache_autoenable.py, the .pth

# A trainer that knows nothing of kcache. It configures logging as a trainer
# would (so kcache's warnings are countable), prints what happened as JSON
# and exits with its first argument.
TRAIN = """
import json, logging, sys
logging.basicConfig(format="LOG %(levelname)s %(name)s: %(message)s")
at_start = sorted(m for m in sys.modules if "kcache" in m)
torch_at_start = "torch" in sys.modules
import torch
from torch._dynamo.utils import counters
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
with torch.no_grad():  # an inference graph: the cheapest compile
    match = torch.allclose(torch.compile(model)(x), model(x), atol=1e-5)
kcache_torch = sys.modules.get("kcache.torch")
print(json.dumps({
    "argv": sys.argv, "path0": sys.path[0], "name": __name__, "match": match, "at_start": at_start,
    "torch_at_start": torch_at_start,
    "inductor": {k: v for k, v in counters["inductor"].items() if "cache" in k},
    "kcache": kcache_torch.stats() if kcache_torch else None,
}))
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def trainer(tmp_path):
    script = tmp_path / "scripts" / "train.py"
    script.parent.mkdir()
    script.write_text(TRAIN)
    return script


def environment(tmp_path: Path, name: str, url: str, **extra: str) -> dict:
    """A fresh node: empty Inductor and Triton dirs, kcache only through KCACHE_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KCACHE_TORCH", "TORCHINDUCTOR_", "TRITON_"))}
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name / "inductor"),
        TRITON_CACHE_DIR=str(tmp_path / name / "triton"),
        KCACHE_URL=url,
        KCACHE_NAMESPACE="launcher",
        KCACHE_TORCH_TIMEOUT_MS="500",
        PYTHONPATH=os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
    )
    if "TORCHINDUCTOR_VEC_ISA_OK" in os.environ:  # conftest's scalar kernels: quicker, and not what is tested
        env["TORCHINDUCTOR_VEC_ISA_OK"] = os.environ["TORCHINDUCTOR_VEC_ISA_OK"]
    env.update(extra)
    return env


def run(args: list, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def result(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout.strip().splitlines()[-1])


def warnings(proc: subprocess.CompletedProcess) -> list:
    return [line for line in proc.stderr.splitlines() if line.startswith("LOG WARNING kcache")]


@pytest.fixture
def site_python(tmp_path):
    """A Python whose site-packages holds kcache_torch_autoenable.pth, as an
    install of the package leaves it; torch and kcache come through a path
    .pth (site-packages are where .pth files are read, not PYTHONPATH)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )
    paths = [str(Path(torch.__file__).parents[1]), str(PACKAGE_ROOT)]
    (site / "00-kcache-test-paths.pth").write_text("\n".join(paths) + "\n")
    pth = "kcache_torch_autoenable.pth"
    (site / pth).write_bytes((PACKAGE_ROOT / pth).read_bytes())
    return python


def test_a_fresh_process_hits_through_the_launcher_and_through_kcache_torch_1(daemon, tmp_path, trainer,
                                                                             site_python):
    launch = [sys.executable, "-m", "kcache.torch.run", str(trainer), "3", "--flag", "x"]
    cold = run(launch, environment(tmp_path, "cold", daemon.url), tmp_path)
    assert cold.returncode == 3, cold.stderr[-4000:]
    first = result(cold)
    assert first["argv"] == [str(trainer), "3", "--flag", "x"]  # as `python train.py 3 --flag x` sees it
    assert first["path0"] == str(trainer.parent) and first["name"] == "__main__"
    assert not first["torch_at_start"]  # the script imports torch itself, after its own set-up
    assert first["match"] and first["kcache"]["fx-graph.puts"] >= 1
    assert first["inductor"].get("fxgraph_cache_hit", 0) == 0

    warm = run([sys.executable, "-m", "kcache.torch.run", "--", str(trainer), "0"],
               environment(tmp_path, "fresh-node", daemon.url), tmp_path)
    assert warm.returncode == 0, warm.stderr[-4000:]
    second = result(warm)
    assert second["match"] and second["argv"] == [str(trainer), "0"]
    assert second["inductor"].get("fxgraph_cache_hit", 0) >= 1
    assert second["inductor"].get("fxgraph_cache_miss", 0) == 0
    # Empty local dirs: the hit came from kcached (through the prefetch or a lookup).
    assert second["kcache"] is not None and second["kcache"].get("errors", 0) == 0
    assert warnings(cold) == [] and warnings(warm) == []

    # No launcher and no kcache in the script: the .pth switch, the same hits.
    switched = run([str(site_python), str(trainer), "0"],
                   environment(tmp_path, "another-node", daemon.url, KCACHE_TORCH="1"), tmp_path)
    assert switched.returncode == 0, switched.stderr[-4000:]
    third = result(switched)
    assert third["at_start"] == ["_kcache_autoenable"]  # the hook only: kcache comes with torch.compile
    assert third["match"] and third["inductor"].get("fxgraph_cache_hit", 0) >= 1
    assert third["inductor"].get("fxgraph_cache_miss", 0) == 0
    assert third["kcache"] is not None and third["kcache"].get("errors", 0) == 0 and warnings(switched) == []


def test_without_kcache_torch_the_pth_file_imports_nothing(tmp_path, site_python):
    probe = "import sys; print(sorted(m for m in sys.modules if 'kcache' in m or m.split('.')[0] == 'torch'))"
    for value, loaded in ((None, []), ("0", []), ("1", ["_kcache_autoenable"])):
        env = environment(tmp_path, "probe", "http://127.0.0.1:1")
        if value is not None:
            env["KCACHE_TORCH"] = value
        proc = run([str(site_python), "-c", probe], env, tmp_path)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert json.loads(proc.stdout.replace("'", '"')) == loaded, value  # never torch at start-up


def test_with_kcached_down_the_script_runs_and_one_warning_is_logged(tmp_path, trainer, site_python):
    proc = run([str(site_python), str(trainer), "0"],
               environment(tmp_path, "down", "http://127.0.0.1:1", KCACHE_TORCH="1"), tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = result(proc)
    assert out["match"] and out["kcache"]["errors"] >= 2  # several failed calls...
    logged = warnings(proc)
    assert len(logged) == 1, proc.stderr[-4000:]  # ...one warning for the outage
    assert "http://127.0.0.1:1" in logged[0] and "fail open" in logged[0]


def test_the_launcher_runs_a_module_and_passes_its_exception_on(daemon, tmp_path):
    (tmp_path / "failing_job.py").write_text(
        "import sys\nprint(sys.argv)\nraise ValueError('the job failed: ' + sys.argv[1])\n"
    )
    proc = run([sys.executable, "-m", "kcache.torch.run", "-m", "failing_job", "arg"],
               environment(tmp_path, "module", daemon.url), tmp_path)
    assert proc.returncode == 1
    assert "ValueError: the job failed: arg" in proc.stderr
    assert proc.stdout.strip() == str([str(tmp_path / "failing_job.py"), "arg"])

    env = environment(tmp_path, "module", daemon.url)
    missing = run([sys.executable, "-m", "kcache.torch.run", "no-such.py"], env, tmp_path)
    assert missing.returncode == 2 and "can't open file" in missing.stderr
    usage = run([sys.executable, "-m", "kcache.torch.run"], env, tmp_path)
    assert usage.returncode == 2 and "usage" in usage.stderr


def test_fail_open_events_are_logged_once_per_change_of_state(caplog):
    events = FailOpenLog("http://kcached:7070")
    with caplog.at_level(logging.WARNING, logger="kcache"):
        for failed in (False, True, True, True, False, False, True, False):
            events.observe(failed, "connect: Connection refused")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4, messages  # down, up, down, up
    assert "Connection refused" in messages[0] and "answers again, after 3 failed" in messages[1]


def test_a_refused_entry_is_logged_once_per_reason(daemon, keys, caplog):
    from kcache.torch import Settings
    from kcache.torch._session import Session
    from kcache.torch.inductor_backend import KcacheInductorBackend

    key = "pt2:fx-graph-v1::flauncher:c1"
    writer = KcacheInductorBackend(Session(Settings(url=daemon.url, namespace="test")), "fx-graph", False)
    writer.put(key, json.dumps({"data": "AAAA", "time_taken_ms": 1}).encode())
    session = Session(Settings(url=daemon.url, namespace="test", verify_signatures=True, trusted_keys=keys[1]))
    reader = KcacheInductorBackend(session, "fx-graph", False)
    with caplog.at_level(logging.WARNING, logger="kcache"):
        assert reader.get(key) is None and reader.get(key) is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and "unknown-key" in messages[0], messages
    assert session.client.verification_stats()["rejected_total"] == 2  # still counted per entry


# One rank of a torchrun job that knows nothing of kcache: joins the process
# group (gloo), compiles, and writes what happened to result-<rank>.json.
RANK_TRAIN = """
import json, os, sys
import torch
import torch.distributed as dist
from torch._dynamo.utils import counters
dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
x = torch.randn(8, 16)
with torch.no_grad():
    match = torch.allclose(torch.compile(model)(x), model(x), atol=1e-5)
dist.barrier()
kcache_torch = sys.modules.get("kcache.torch")
with open(os.path.join(sys.argv[1], f"result-{dist.get_rank()}.json"), "w") as out:
    json.dump({"match": match, "world": dist.get_world_size(),
               "inductor": {k: v for k, v in counters["inductor"].items() if "cache" in k},
               "kcache": kcache_torch.stats() if kcache_torch else None}, out)
dist.destroy_process_group()
"""


def test_torchrun_ranks_run_through_the_launcher_and_a_fresh_job_hits_in_every_rank(daemon, tmp_path):
    script = tmp_path / "rank_train.py"
    script.write_text(RANK_TRAIN)

    def torchrun(name: str) -> list:
        out = tmp_path / name / "out"
        out.mkdir(parents=True)
        proc = run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    "-m", "kcache.torch.run", str(script), str(out)],
                   environment(tmp_path, name, daemon.url, OMP_NUM_THREADS="1"), tmp_path)
        assert proc.returncode == 0, proc.stderr[-4000:]
        return [json.loads((out / f"result-{rank}.json").read_text()) for rank in (0, 1)]

    cold = torchrun("cold-job")
    assert all(r["match"] and r["world"] == 2 and r["kcache"] is not None for r in cold)
    assert sum(r["kcache"].get("fx-graph.puts", 0) for r in cold) >= 1
    # The same job on a fresh node (empty local dirs): every rank hits, from kcached.
    fresh = torchrun("fresh-job")
    for rank in fresh:
        assert rank["match"] and rank["kcache"].get("errors", 0) == 0
        assert rank["inductor"].get("fxgraph_cache_hit", 0) >= 1
        assert rank["inductor"].get("fxgraph_cache_miss", 0) == 0
