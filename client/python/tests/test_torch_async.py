"""kcache.torch.compile(async_compile=True) against a real kcached, on the CPU:
the first steps run eager while a separate process compiles the module into
kcache, later steps run compiled from the cache with the optimizer's
parameters unchanged; a failing background compile leaves the job eager with
one warning; two ranks share one background compile through a lease.

The trainer is this process (torch and Inductor are imported once for all
tests); the background compile and the second rank are processes of their own."""

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from torch_support import require_torch

require_torch()

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

import kcache.torch  # noqa: E402
import torch_async_models  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
# One compile thread (no worker pool to start on a 2-core CI machine), and the
# background compile at the trainer's priority.
# One thread per process: OpenMP's spinning threads would take the cores the
# other process compiles on.
# No vector-ISA probe (it compiles and runs a test program per ISA): scalar
# C++ kernels compile sooner. Every rank's Inductor config is the same: it is
# part of the background compile's key.
QUICK = {
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
    "TORCHINDUCTOR_VEC_ISA_OK": "0",
    "KCACHE_TORCH_ASYNC_NICE": "0",
    "OMP_NUM_THREADS": "1",
}


@pytest.fixture
def kcache_on(daemon, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    for name, value in QUICK.items():
        monkeypatch.setenv(name, value)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch._dynamo.reset()
    counters.clear()
    kcache.torch.enable(url=daemon.url, namespace="ci", timeout_ms=2000, report=False, prefetch=False)
    # As QUICK's variables set them in a fresh process (Inductor read its
    # environment at import); the child gets them with the configs.
    with torch._inductor.config.patch({"compile_threads": 1, "cpp.vec_isa_ok": False}):
        yield daemon
    kcache.torch.disable()
    torch._dynamo.reset()
    torch.set_num_threads(threads)


def steps_until_switched(wrapped, model, build, train: bool, after: int = 3, limit_s: float = 120) -> dict:
    """Trains (or infers with) `wrapped` beside an eager twin built the same
    way until `after` steps past the switch, or the job failed for 5 steps."""
    reference = build()
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (model, reference)]
    torch.manual_seed(1)
    states, match = [], True
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        x = torch.randn(16, 32)
        if train:
            for m, opt in zip((wrapped, reference), opts):
                opt.zero_grad()
                m(x).square().mean().backward()
                opt.step()
            match &= all(torch.allclose(p, q, atol=1e-4) for p, q in zip(model.parameters(), reference.parameters()))
        else:
            with torch.no_grad():
                match &= torch.allclose(wrapped(x), reference(x), atol=1e-5)
        states.append(wrapped.state)
        if wrapped.state == "compiled" and len(states) - wrapped.switched_at_call >= after:
            break
        if states.count("failed") >= 5:
            break
        time.sleep(0.05)
    same = all(a is b for a, b in zip(opts[0].param_groups[0]["params"], model.parameters()))
    return {"states": states, "match": bool(match), "same_params": same}


def test_first_steps_eager_later_steps_compiled_and_training_goes_on(kcache_on, caplog):
    model = torch_async_models.mlp()
    wrapped = kcache.torch.compile(model, async_compile=True, dynamic=False)
    with caplog.at_level(logging.WARNING, logger="kcache"):
        run = steps_until_switched(wrapped, model, torch_async_models.mlp, train=True)
    states = run["states"]
    print(f"background compile {wrapped.child_seconds:.1f} s, switch step {wrapped.switch_seconds:.1f} s")
    assert states[0] == "compiling" and states[-1] == "compiled", states
    assert wrapped.switched_at_call >= 2  # the first step ran eager
    assert run["match"] and run["same_params"]  # compiled steps train the optimizer's parameters as eager does
    assert wrapped.compiled_by == "self" and wrapped.failure is None
    assert not [r for r in caplog.records if r.name == "kcache"]
    assert counters["frames"]["ok"] >= 1  # Dynamo compiled this process's own module
    assert wrapped.warm_load_misses == 0  # the warm load hit: everything it needed was in the cache
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1  # forward and backward, as the child compiled them


def test_a_failing_background_compile_leaves_the_job_eager_with_one_warning(kcache_on, caplog):
    model = torch_async_models.mlp()
    wrapped = kcache.torch.compile(model, async_compile=True, factory=torch_async_models.broken)
    with caplog.at_level(logging.WARNING, logger="kcache"):
        run = steps_until_switched(wrapped, model, torch_async_models.mlp, train=True)
    states = run["states"]
    assert states[-1] == "failed" and "compiled" not in states and states.count("failed") >= 5, states
    assert run["match"] and counters["frames"]["ok"] == 0
    assert "exited with 1" in wrapped.failure and "cannot build the model" in wrapped.failure, wrapped.failure
    warnings = [r.getMessage() for r in caplog.records if "async compile" in r.getMessage()]
    assert len(warnings) == 1 and wrapped.failure in warnings[0], warnings


def other_rank(url: str, node: Path, namespace: str = "ci") -> subprocess.Popen:
    """torch_async_child.py as a trainer on another node (nothing local)."""
    env = dict(os.environ)
    env.update(QUICK)
    env.update(
        RANK="1",
        TORCHINDUCTOR_CACHE_DIR=str(node / "inductor"),
        TRITON_CACHE_DIR=str(node / "triton"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "client" / "python"), str(HERE), env.get("PYTHONPATH")])),
    )
    return subprocess.Popen(
        [sys.executable, str(HERE / "torch_async_child.py"), "infer", url, "linear", namespace],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(peer: subprocess.Popen) -> dict:
    out, err = peer.communicate(timeout=240)
    assert peer.returncode == 0, err[-4000:]
    return json.loads(out.strip().splitlines()[-1])


def test_two_ranks_share_one_background_compile(kcache_on, tmp_path):
    model = torch_async_models.linear()
    wrapped = kcache.torch.compile(model, async_compile=True, mode="default")
    with torch.no_grad():
        wrapped(torch.randn(16, 32))  # rank 0 asks first: its child compiles
    peer = other_rank(kcache_on.url, tmp_path / "rank1")
    run = steps_until_switched(wrapped, model, torch_async_models.linear, train=False)
    other = finished(peer)

    assert wrapped.compiled_by == "self" and run["states"][-1] == "compiled" and run["match"]
    assert other["compiled_by"] == "peer", other  # it started no compile of its own
    assert other["states"][-1] == "compiled" and other["match"] and other["warm_load_misses"] == 0, other
    assert other["kcache"].get("fx-graph.hits", 0) >= 1  # its cache dir is empty: the hit came from kcache


def test_a_trainer_that_set_an_inductor_option_before_compiling_still_fills_kcache(daemon, tmp_path):
    """enable() leaves its hooks for the first torch.compile, so a trainer
    that sets an Inductor option first hands its background compile a config
    whose remote-cache switches are off; the compile must still put its
    entries in kcache: a second node then switches on kcache's hits alone."""
    namespace = f"async-config-{os.getpid()}"
    first = finished(other_rank(daemon.url, tmp_path / "node0", namespace))
    assert first["compiled_by"] == "self" and first["states"][-1] == "compiled" and first["match"], first
    second = finished(other_rank(daemon.url, tmp_path / "node1", namespace))
    assert second["compiled_by"] == "peer" and second["states"][-1] == "compiled", second
    assert second["warm_load_misses"] == 0 and second["kcache"].get("fx-graph.hits", 0) >= 1, second


# A trainer whose model class lives in its own script: the background compile
# finds it as multiprocessing's spawn does (the script run as __mp_main__,
# its __main__ part not run). backend="eager": Dynamo only, no Inductor.
SCRIPT = """
import json, sys, time
import torch
import kcache.torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)
        self.register_buffer("index", torch.tensor([3, 1]))

    def forward(self, x):
        return self.fc(x)[:, self.index]


if __name__ == "__main__":
    kcache.torch.enable(url=sys.argv[1], namespace="ci", timeout_ms=2000, report=False, prefetch=False)
    model = Net()
    wrapped = kcache.torch.compile(model, async_compile=True, backend="eager")
    deadline = time.monotonic() + 60
    while wrapped.state in ("eager", "compiling") and time.monotonic() < deadline:
        x = torch.randn(2, 8)
        assert torch.equal(wrapped(x), model(x))
        time.sleep(0.05)
    print(json.dumps({"state": wrapped.state, "failure": wrapped.failure, "calls": wrapped.calls}))
"""


def test_a_model_class_of_the_trainers_own_script_compiles_in_the_background(daemon, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    env.update(QUICK)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "client" / "python"), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(script), daemon.url], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["state"] == "compiled" and result["calls"] >= 2, result


def test_the_childs_copy_has_meta_parameters_shared_as_the_trainers_and_real_buffers():
    from kcache.torch import _async_compile

    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # tied, as GPT-2's embedding and head
    model.register_buffer("positions", torch.arange(5))
    copy = _async_compile._skeleton(model)
    assert all(p.is_meta for p in copy.parameters()) and copy[1].weight is copy[0].weight
    assert torch.equal(copy.positions, model.positions) and not model[0].weight.is_meta
    _async_compile._materialize(copy, "cpu")
    assert copy[1].weight is copy[0].weight and not copy[0].weight.is_meta
    assert _async_compile._tensor_signature(copy) == _async_compile._tensor_signature(model)


def test_the_compile_process_leaves_cpus_to_the_trainer():
    from kcache.torch._async_compile import spare_cpu_affinity

    # 16 CPUs, 2 spared: the compile keeps 14 (and Inductor sizes its pool by them).
    assert spare_cpu_affinity(set(range(16)), 2) == set(range(2, 16))
    # A trainer pinned by its launcher: the spare CPUs come out of its own set.
    assert spare_cpu_affinity({8, 9, 10, 11}, 2) == {10, 11}
    # Nothing to spare on a small machine, or when asked for none.
    assert spare_cpu_affinity({0, 1}, 2) == {0, 1}
    assert spare_cpu_affinity({0, 1, 2}, 2) == {0, 1, 2}
    assert spare_cpu_affinity(set(range(8)), 0) == set(range(8))
