"""kcache keeps the configs coordinate descent tuned (see kcache/torch/_coordesc):
a marked Triton config keeps its mark through pickling, and a statically
launchable kernel loaded from a cache entry takes its cached tuned config,
marked, whether it was compiled with one config or several."""

import pickle
import types

import pytest
from torch_support import require_torch

require_torch()

pytest.importorskip("triton", reason="Inductor's Triton runtime needs Triton")

from torch._inductor.runtime import triton_heuristics  # noqa: E402
from torch._inductor.runtime.autotune_cache import AutotuneCache  # noqa: E402
from torch._inductor.runtime.triton_compat import Config  # noqa: E402
from torch._inductor.runtime.triton_heuristics import hash_configs  # noqa: E402

from kcache.torch import _coordesc  # noqa: E402

MARK = "found_by_coordesc"


@pytest.fixture
def installed():
    undo = _coordesc.install()
    yield
    undo()


def marked(config):
    return getattr(config, MARK, False)


def test_a_marked_config_keeps_its_mark_through_pickle(installed):
    config = Config({"XBLOCK": 64}, num_warps=4, num_stages=1)
    setattr(config, MARK, True)
    copy = pickle.loads(pickle.dumps(config))
    assert marked(copy)
    assert copy.kwargs == {"XBLOCK": 64} and copy.num_warps == 4
    assert not marked(pickle.loads(pickle.dumps(Config({"XBLOCK": 64}))))


def test_undo_restores_tritons_unpickling():
    autotuner = triton_heuristics.CachingAutotuner
    before = (Config.__setstate__, autotuner.recheck_autotune_cache)
    undo = _coordesc.install()
    assert (Config.__setstate__, autotuner.recheck_autotune_cache) != before  # torch 2.11 with Triton 3.6 has both gaps
    undo()
    assert (Config.__setstate__, autotuner.recheck_autotune_cache) == before


class Kernel:
    """A statically loaded CachingAutotuner as recheck_autotune_cache sees it:
    its compile results, source file, Inductor meta and compiled function."""

    def __init__(self, tmp_path, configs):
        self.filename = str(tmp_path / "cabcdefkernel.py")
        self.inductor_meta = {
            "coordinate_descent_tuning": True,
            "autotune_local_cache": True,
            "autotune_remote_cache": False,
        }
        self.compile_results = [types.SimpleNamespace(config=c) for c in configs]
        self.fn = types.SimpleNamespace(fn=None)
        self.compiled = []

    def is_statically_launchable(self):
        return True

    def _precompile_config(self, config):
        self.compiled.append(config)
        return types.SimpleNamespace(config=config)

    def recheck(self):
        reloads = []
        triton_heuristics.CachingAutotuner.recheck_autotune_cache(
            self, lambda: reloads.append(1) or types.SimpleNamespace(fn=types.SimpleNamespace(fn="reloaded"))
        )
        return reloads

    def cache_best(self, configs, best, tuned=True):
        cache = AutotuneCache.create(self.inductor_meta, self.filename, hash_configs(configs))
        cache.save(best, time_taken_ns=1_000_000, found_by_coordesc=tuned)


def test_a_one_config_kernel_takes_its_tuned_config_marked(installed, tmp_path):
    start = Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
    kernel = Kernel(tmp_path, [start])
    kernel.cache_best([start], Config({"XBLOCK": 128}, num_warps=4, num_stages=1))
    assert kernel.recheck() == []
    assert kernel.compile_results[0].config is start and marked(start)
    assert kernel.autotune_cache_info["autotune_cache_state"] == "hit"


def test_a_kernel_tuned_to_a_config_it_lacks_compiles_that_config(installed, tmp_path):
    start = Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
    kernel = Kernel(tmp_path, [start])
    kernel.cache_best([start], Config({"XBLOCK": 256}, num_warps=8, num_stages=1))
    assert kernel.recheck() == [1]
    (config,) = kernel.compiled
    assert config.kwargs == {"XBLOCK": 256} and config.num_warps == 8 and marked(config)
    assert kernel.fn.fn == "reloaded"
    assert kernel.compile_results[0].config is config


def test_of_several_configs_the_tuned_one_is_kept_marked(installed, tmp_path):
    configs = [Config({"XBLOCK": b}, num_warps=4, num_stages=1) for b in (32, 64, 128)]
    kernel = Kernel(tmp_path, configs)
    kernel.cache_best(configs, Config({"XBLOCK": 64}, num_warps=4, num_stages=1))
    kernel.recheck()
    assert [r.config for r in kernel.compile_results] == [configs[1]]
    assert marked(configs[1])


def test_a_config_the_cache_did_not_tune_is_tuned_again(installed, tmp_path):
    configs = [Config({"XBLOCK": b}, num_warps=4, num_stages=1) for b in (32, 64)]
    kernel = Kernel(tmp_path, configs)
    kernel.cache_best(configs, configs[0], tuned=False)
    kernel.recheck()
    assert [r.config for r in kernel.compile_results] == [configs[0]]
    assert not marked(configs[0])


def test_a_miss_or_a_marked_kernel_changes_nothing(installed, tmp_path):
    start = Config({"XBLOCK": 128}, num_warps=4, num_stages=1)
    kernel = Kernel(tmp_path, [start])
    kernel.recheck()
    assert kernel.compile_results[0].config is start and not marked(start)
    assert kernel.autotune_cache_info["autotune_cache_state"] == "miss"

    # A bundle's kernel: its one config is the tuned one, marked; whatever
    # the cache holds for that config list, it is kept.
    bundled = pickle.loads(pickle.dumps(_marked(Config({"XBLOCK": 16}))))
    kernel = Kernel(tmp_path / "bundled", [bundled])
    (tmp_path / "bundled").mkdir()
    kernel.cache_best([bundled], Config({"XBLOCK": 32}, num_warps=2, num_stages=1))
    assert kernel.recheck() == []
    assert kernel.compile_results[0].config is bundled and marked(bundled) and kernel.compiled == []


def _marked(config):
    setattr(config, MARK, True)
    return config
