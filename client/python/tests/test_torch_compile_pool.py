"""Inductor's compile workers start when a graph compiles (an AOTAutograd miss
or Inductor's codegen; kcache/torch/_compile_pool), not when compile_fx first
sees CUDA inputs or a loaded graph asks for them: a process that hits every
graph starts none."""

import pytest
from torch_support import require_torch

require_torch()

import torch  # noqa: E402
from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCache  # noqa: E402
from torch._inductor import async_compile, compile_fx, config  # noqa: E402

from kcache.torch import _compile_pool  # noqa: E402


@pytest.fixture
def pool(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    async_compile.shutdown_compile_workers()
    deferred, undo = _compile_pool.install()
    with config.patch(compile_threads=2):
        yield deferred
    undo()
    async_compile.shutdown_compile_workers()


def workers_started() -> bool:
    return bool(async_compile._pool_set)


def compile_a_graph(width: int = 8) -> None:
    """A CPU graph through AOTAutograd and Inductor, in cache dirs empty but
    for what earlier calls of this test put there."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
    x = torch.randn(4, width)
    with torch.no_grad():
        assert torch.allclose(torch.compile(model)(x), model(x), atol=1e-5)


def test_the_wakeup_waits_for_a_miss(pool):
    async_compile.AsyncCompile.wakeup()  # what compile_fx does with CUDA inputs
    async_compile.maybe_warm_pool()  # what the "inductor" backend does
    assert not workers_started() and not pool.started
    compile_a_graph()  # a cold compile: its lookups miss
    assert pool.started and workers_started()


def test_a_process_that_hits_every_graph_starts_no_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    compile_a_graph(12)  # fills the local caches, without kcache
    torch._dynamo.reset()
    async_compile.shutdown_compile_workers()
    deferred, undo = _compile_pool.install()
    try:
        with config.patch(compile_threads=2):
            async_compile.AsyncCompile.wakeup()
            compile_a_graph(12)  # the same graph: every lookup hits
            assert not async_compile.AsyncCompile.use_process_pool()  # what a loaded graph's kernels ask
        assert not deferred.needed and not deferred.started and not workers_started()
    finally:
        undo()
        async_compile.shutdown_compile_workers()


def test_an_aotautograd_miss_starts_them_before_the_joint_graph_is_traced(pool, monkeypatch):
    needed_at_codegen = []
    codegen = compile_fx.fx_codegen_and_compile

    def watch(*args, **kwargs):
        needed_at_codegen.append(pool.needed)
        return codegen(*args, **kwargs)

    monkeypatch.setattr(compile_fx, "fx_codegen_and_compile", watch)
    async_compile.AsyncCompile.wakeup()
    compile_a_graph(20)
    assert needed_at_codegen and needed_at_codegen[0]  # AOTAutograd's cache said "no graph" first
    assert pool.started and workers_started()


def test_a_wakeup_after_the_start_reaches_inductor(pool):
    calls = []
    pool.need()
    pool.asked(lambda: calls.append("first"))
    pool.asked(lambda: calls.append("later"))  # a quiesced pool woken for a recompile
    assert calls == ["first", "later"]


def test_a_pool_already_running_is_used_at_once(pool):
    pool.need()
    async_compile.AsyncCompile.wakeup()
    assert workers_started()
    second, undo = _compile_pool.install()  # kcache enabled again in this process
    try:
        assert second.needed and second.started  # its kernels use the running pool
    finally:
        undo()


def test_a_miss_before_the_wakeup_starts_them_at_the_wakeup(pool):
    compile_a_graph()
    assert pool.needed and not workers_started()  # nobody asked for workers: a CPU graph
    async_compile.AsyncCompile.wakeup()
    assert pool.started and workers_started()


def test_undo_puts_back_inductors_warm_up(tmp_path):
    def inductors():
        compiler = async_compile.AsyncCompile.__dict__
        return (
            compiler["wakeup"],
            compiler["use_process_pool"],
            AOTAutogradCache.__dict__["try_load"],
            compile_fx.fx_codegen_and_compile,
            async_compile.maybe_warm_pool,
        )

    before = inductors()
    _, undo = _compile_pool.install()
    assert all(a is not b for a, b in zip(inductors(), before))
    undo()
    assert all(a is b for a, b in zip(inductors(), before))
