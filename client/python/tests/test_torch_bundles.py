"""Mega-Cache bundles (KCACHE_TORCH_BUNDLES=1) against a real kcached: a fresh
process loads its run's bundle and Dynamo traces nothing; another model under
the same run does not use it; a bundle PyTorch refuses is logged and skipped."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from torch_support import require_torch

require_torch()

import torch  # noqa: E402

from kcache.torch import Settings, _bundle_header, _bundle_watch, _bundles, _precompile_fixes  # noqa: E402
from kcache.torch._session import Session  # noqa: E402

REPO = Path(__file__).resolve().parents[3]

# A trainer: one compiled train step, checked against eager; the model's width
# and the compile backend come from argv, so a changed model or changed compile
# kwargs is the same script and run.
CHILD = """
import json, os, sys
import torch
from torch._dynamo.utils import counters
import kcache.torch

kcache.torch.enable(url=sys.argv[1], namespace="ci", timeout_ms=2000)
width, backend = int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = torch.nn.Sequential(
    torch.nn.Linear(32, width), torch.nn.GELU(), torch.nn.LayerNorm(width), torch.nn.Linear(width, 8)
)
x = torch.randn(int(os.environ.get("CHILD_BATCH", "16")), 32)
compiled = torch.compile(model, backend=backend) if backend != "inductor" else torch.compile(model)
if os.environ.get("CHILD_FIRST_BATCH"):  # a first call unlike the saving run's
    compiled(torch.randn(int(os.environ["CHILD_FIRST_BATCH"]), 32))
compiled(x).square().mean().backward()
if os.environ.get("CHILD_LATER_BATCH"):  # a later call with a new shape
    compiled(torch.randn(int(os.environ["CHILD_LATER_BATCH"]), 32))
grads = [p.grad.clone() for p in model.parameters()]
model.zero_grad()
model(x).square().mean().backward()
print(json.dumps({
    "match": all(torch.allclose(g, p.grad, atol=1e-5) for g, p in zip(grads, model.parameters())),
    "dynamo_cache": dict(counters["dynamo_cache"]),
    "frames": counters["frames"].get("total", 0),
    "fx_misses": counters["inductor"].get("fxgraph_cache_miss", 0),
    "kcache": kcache.torch.stats(),
}))
"""


def run_child(
    script: Path, tmp_path: Path, name: str, url: str, width: int, backend: str = "inductor", **extra_env: str
) -> dict:
    env = dict(os.environ)
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name / "inductor"),
        TRITON_CACHE_DIR=str(tmp_path / name / "triton"),
        KCACHE_RUN_ID="bundle-child",
        KCACHE_TORCH_BUNDLES="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "client" / "python"), env.get("PYTHONPATH")])),
    )
    env.update(extra_env)
    proc = subprocess.run(
        [sys.executable, str(script), url, str(width), backend], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def trainer_with_a_saved_bundle(daemon, tmp_path: Path, width: int, run_id: str, child: str = CHILD) -> Path:
    """The trainer script, after a cold run of it that puts its bundle (at exit)."""
    script = tmp_path / "trainer.py"
    script.write_text(child)
    cold = run_child(script, tmp_path, "cold", daemon.url, width, KCACHE_RUN_ID=run_id)
    assert cold["match"] and cold["kcache"]["bundle_misses"] == 1
    return script


def compiled_without_the_bundle(run: dict) -> bool:
    """A run that read the marker: no bundle loaded, its frames traced, correct."""
    ks = run["kcache"]
    return run["match"] and run["frames"] >= 1 and ks.get("bundle_unsupported") == 1 and ks.get("bundle_hits", 0) == 0


def test_a_fresh_process_loads_the_bundle_and_skips_tracing(daemon, tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(CHILD)
    cold = run_child(script, tmp_path, "cold", daemon.url, 64)
    assert cold["match"] and cold["frames"] >= 1
    assert cold["kcache"]["bundle_misses"] == 1  # the bundle is put at exit

    fresh = run_child(script, tmp_path, "fresh", daemon.url, 64)
    assert fresh["match"]
    assert fresh["kcache"]["bundle_hits"] == 1 and fresh["kcache"]["bundle_precompile_entries"] >= 1
    # Dynamo's precompile entry was found and no frame was traced or compiled.
    assert fresh["dynamo_cache"] == {"dynamo_cache_hit": 1}
    assert fresh["frames"] == 0 and fresh["fx_misses"] == 0

    # The same run (script, run id, key) with other compile kwargs
    # (backend="eager" compiles in no time), then with another model: each
    # differs from the bundle of the run before it in that one thing, so the
    # bundle is not loaded and Dynamo traces. The first one runs on the cold
    # run's node, whose local dir holds PyTorch's own precompile entry for
    # the same function (found by name and line alone): not used either.
    for name, width, backend in (("cold", 64, "eager"), ("other-model", 48, "eager")):
        other = run_child(script, tmp_path, name, daemon.url, width, backend)
        assert other["match"] and other["frames"] >= 1, name
        assert other["kcache"].get("bundle_hits", 0) == 0, name
        assert other["kcache"]["bundle_signature_mismatches"] == 1, name
        assert other["dynamo_cache"].get("dynamo_cache_hit", 0) == 0, name


# Put in before the trainer runs (sitecustomize): PyTorch cannot load the
# saved guards, as with transformers' GPT-2 and dynamic=True on PyTorch 2.11
# (a guard source's __post_init__ installs a guard while they are unpickled,
# outside a trace). The trainer's own file stays the same: so does its bundle key.
UNLOADABLE_GUARDS = """
import torch._dynamo.package as package

def load_guards_state(data):
    raise RuntimeError("TracingContext.get() must be called within an ongoing trace.")

package.load_guards_state = load_guards_state
"""


def test_a_bundle_pytorch_cannot_install_traces_and_is_not_loaded_again(daemon, tmp_path):
    # PyTorch 2.11 alone raises an AssertionError out of torch.compile here
    # (its fresh start after a failed install asserts the package is new).
    script = tmp_path / "trainer.py"
    script.write_text(CHILD)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(UNLOADABLE_GUARDS)
    cold = run_child(script, tmp_path, "cold", daemon.url, 56)
    assert cold["match"] and cold["kcache"]["bundle_misses"] == 1

    path = os.pathsep.join([str(tmp_path / "site"), str(REPO / "client" / "python"), os.environ.get("PYTHONPATH", "")])
    fresh = run_child(script, tmp_path, "fresh", daemon.url, 56, PYTHONPATH=path)
    assert fresh["match"] and fresh["frames"] >= 1  # traced as without a bundle
    assert fresh["kcache"]["bundle_hits"] == 1 and fresh["kcache"]["bundle_install_failures"] == 1
    assert fresh["kcache"]["bundle_unsupported_puts"] == 1  # a marker replaces the bundle

    assert compiled_without_the_bundle(run_child(script, tmp_path, "later", daemon.url, 56))


def test_a_bundle_that_serves_no_call_of_a_run_is_replaced_by_a_marker(daemon, tmp_path):
    # Every call of the run fails its compiled function's guards (here: another
    # batch size throughout; on the GPU: GPT-2 with dynamic=True, whose reloaded
    # guards cannot pass): loading it only costs, so the next runs do not.
    env = {"KCACHE_RUN_ID": "bundle-serves-nothing"}
    script = trainer_with_a_saved_bundle(daemon, tmp_path, 40, env["KCACHE_RUN_ID"])
    fresh = run_child(script, tmp_path, "fresh", daemon.url, 40, CHILD_BATCH="24", **env)
    assert fresh["match"] and fresh["frames"] >= 1 and fresh["kcache"]["bundle_hits"] == 1  # the marker: at exit

    assert compiled_without_the_bundle(run_child(script, tmp_path, "later", daemon.url, 40, **env))


def test_a_bundle_that_serves_a_call_is_kept_whatever_else_the_run_traces(daemon, tmp_path):
    # A first call unlike the saving run's (a warm-up batch), then the bundle
    # serves, then a new shape: traced twice in a process that loaded a
    # bundle, which also needs Dynamo's names past the bundle's (PyTorch 2.11
    # alone asserted "name not in scope" at the first of those traces).
    env = {"KCACHE_RUN_ID": "bundle-serves-some"}
    script = trainer_with_a_saved_bundle(daemon, tmp_path, 44, env["KCACHE_RUN_ID"])
    fresh = run_child(script, tmp_path, "fresh", daemon.url, 44, CHILD_FIRST_BATCH="24", CHILD_LATER_BATCH="8", **env)
    assert fresh["match"] and fresh["frames"] >= 2 and fresh["kcache"]["bundle_hits"] == 1

    later = run_child(script, tmp_path, "later", daemon.url, 44, **env)
    assert later["match"] and later["frames"] == 0 and later["kcache"]["bundle_hits"] == 1
    assert later["kcache"].get("bundle_unsupported", 0) == 0


# Two compiled functions of one module, each with a graph break at the same
# offset: Dynamo names their resume functions __resume_at_<offset>_<N>.
TWO_FUNCTIONS = """
import torch


def fa(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y + 1


def fb(x):
    y = x.cos()
    torch._dynamo.graph_break()
    return y + 2
"""

TWO_FUNCTIONS_CHILD = """
import json, os, sys
import torch
from torch._dynamo.utils import counters
import kcache.torch

kcache.torch.enable(url=sys.argv[1], namespace="ci", timeout_ms=2000)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import two_functions as m

torch.set_grad_enabled(False)
ca = torch.compile(m.fa)
ca(torch.ones(4))
if os.environ.get("CHILD_NEW_SHAPE"):
    ca(torch.ones(6))  # traced after the bundle's packages began to install
cb = torch.compile(m.fb)  # installs fb's package
cb(torch.ones(4))
print(json.dumps({
    "match": all(
        torch.allclose(ca(torch.ones(n)), m.fa(torch.ones(n))) and torch.allclose(cb(torch.ones(n)), m.fb(torch.ones(n)))
        for n in ([4, 6] if os.environ.get("CHILD_NEW_SHAPE") else [4])
    ),
    "frames": counters["frames"].get("total", 0),
    "kcache": kcache.torch.stats(),
}))
"""


def test_a_package_installed_after_a_trace_leaves_the_traced_functions_alone(daemon, tmp_path):
    # PyTorch installs a package's resume functions by the saving process's
    # names without looking: a trace made before (ca at a new shape) had
    # the same numbers, and fb's install replaced its resume function, so
    # ca returned fb's result (2.84 for 1.84). The names move past the
    # whole bundle's when it loads.
    (tmp_path / "two_functions.py").write_text(TWO_FUNCTIONS)
    env = {"KCACHE_RUN_ID": "bundle-two-functions"}
    script = trainer_with_a_saved_bundle(daemon, tmp_path, 0, env["KCACHE_RUN_ID"], TWO_FUNCTIONS_CHILD)
    fresh = run_child(script, tmp_path, "fresh", daemon.url, 0, CHILD_NEW_SHAPE="1", **env)
    assert fresh["kcache"]["bundle_hits"] == 1 and fresh["frames"] >= 1
    assert fresh["match"]


def test_a_run_that_loads_the_bundle_leaves_what_it_carries_out_of_the_manifest(daemon, tmp_path):
    # The saving run's manifest lists the FX-graph and AOTAutograd entries it
    # put; the bundle carries them too, so a run that loads it neither writes
    # them to the local cache nor lists them for the next run to fetch.
    script = tmp_path / "trainer.py"
    script.write_text(CHILD)
    env = {"KCACHE_RUN_ID": "bundle-manifest"}
    cold = run_child(script, tmp_path, "cold", daemon.url, 72, **env)
    assert cold["match"] and cold["kcache"]["fx-graph.puts"] >= 2 and cold["kcache"]["aot-autograd.puts"] == 1

    fresh = run_child(script, tmp_path, "fresh", daemon.url, 72, **env)
    assert fresh["match"] and fresh["frames"] == 0 and fresh["kcache"]["bundle_hits"] == 1
    assert fresh["kcache"]["prefetch_listed"] >= 3
    assert fresh["kcache"]["prefetch_covered_by_bundle"] >= 3  # 2 FX graphs and the AOTAutograd entry
    assert fresh["kcache"].get("prefetch_local_writes", 0) == 0  # the bundle wrote them

    again = run_child(script, tmp_path, "again", daemon.url, 72, **env)
    assert again["match"] and again["frames"] == 0 and again["kcache"]["bundle_hits"] == 1
    assert again["kcache"].get("prefetch_covered_by_bundle", 0) == 0  # not listed, so not fetched
    assert again["kcache"].get("prefetch_bytes", 0) < fresh["kcache"]["prefetch_bytes"]


def test_an_error_of_the_call_itself_is_the_callers_not_the_bundles(daemon, monkeypatch):
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-user-error")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    bundles = _bundles.Bundles(session)
    bundles.start()
    undo = _bundles.install(bundles)
    try:
        try:
            torch.compile(model(), mode="no-such-mode")
        except RuntimeError as e:
            assert "no-such-mode" in str(e)
        else:
            raise AssertionError("torch.compile took an unknown mode")
        assert session.stats.get("bundle_install_failures", 0) == 0
        assert session.stats.get("bundle_unsupported_puts", 0) == 0  # no marker for the caller's mistake
    finally:
        undo()
        session.close()


def test_a_failed_install_is_taken_out_and_the_package_emptied():
    import types

    module = types.ModuleType("kcache_partial_install")
    module.__dict__.update(__compiled_fn_1=1, __import_torch=torch)
    code = (lambda: None).__code__
    entry = types.SimpleNamespace(code_source=None)
    package = types.SimpleNamespace(
        _installed_globals={module: ["__compiled_fn_1", "__import_torch", "__import_torch"]},  # a name twice
        _codes={code: entry},
        _resume_codes={code},
        _cached_backends={"__compiled_fn_1": object()},
        _current_entry=entry,
        _initialized=True,
    )
    _precompile_fixes.undo_partial_install(package)
    assert "__compiled_fn_1" not in module.__dict__ and "__import_torch" not in module.__dict__
    assert package._installed_globals == {} and package._codes == {} and package._resume_codes == set()
    assert package._cached_backends == {} and package._current_entry is None and not package._initialized


def test_an_installed_compiled_function_reports_its_first_call_and_is_put_back():
    import types

    module = types.ModuleType("kcache_installed_backends")
    served = []
    bundles = types.SimpleNamespace(served=served.append)

    def installed(x):
        return x + 1

    note = _bundle_watch.served_note(module, "__compiled_fn_3_x", installed, ("forward", 7), bundles)
    module.__dict__["__compiled_fn_3_x"] = note
    assert note(1) == 2 and served == [("forward", 7)]
    assert module.__dict__["__compiled_fn_3_x"] is installed  # the hot path is PyTorch's own again

    other = object()  # something installed there meanwhile (a reinstall) stays
    note = _bundle_watch.served_note(module, "__compiled_fn_3_x", installed, ("forward", 7), bundles)
    module.__dict__["__compiled_fn_3_x"] = other
    assert note(2) == 3 and module.__dict__["__compiled_fn_3_x"] is other


def test_dynamo_names_move_past_the_bundles():
    import uuid

    from torch._dynamo.bytecode_transformation import unique_id

    def number(name: str) -> int:
        return int(name.rsplit("_", 1)[1])

    uid = str(uuid.uuid4()).replace("-", "_")  # a compiled function's uuid: its digits are not the number
    kinds = [
        lambda n: f"__resume_at_30_{n}",
        lambda n: f"__compiled_fn_{n}_{uid}",
        lambda n: f"__builtins_dict___{n}",  # in a guards pickle
        lambda n: f"__comprehension_forward_at_12_{n}",
    ]
    for highest in range(len(kinds)):  # each kind holds the highest number in turn
        base = number(unique_id("__builtins_dict__")) + 1000  # past whatever this process traced
        names = [kind(base + (9 if i == highest else i)) for i, kind in enumerate(kinds)]
        names.append(f"plain_name_{base + 50}")  # not one Dynamo numbered
        _precompile_fixes.names_after_the_bundle(b"\x00".join(name.encode() for name in names))
        assert number(unique_id("__builtins_dict__")) == base + 10, names[highest]
    before = number(unique_id("__builtins_dict__"))
    _precompile_fixes.names_after_the_bundle(b"no names")
    assert number(unique_id("__builtins_dict__")) > before  # never back


def test_a_run_that_saves_compiles_afresh_though_its_graphs_are_cached(daemon, tmp_path):
    # PyTorch 2.11 cannot package a GPU graph it loaded from the FX-graph
    # cache, so a saving run's lookups miss (on graphs on a GPU by default).
    # On CPU PyTorch packages either way: "always" shows the mechanism here.
    script = tmp_path / "trainer.py"
    script.write_text(CHILD)
    # A run without bundles puts the FX-graph entries first (as a cluster
    # that used kcache before bundles were switched on).
    plain = run_child(script, tmp_path, "plain", daemon.url, 40, KCACHE_TORCH_BUNDLES="0", KCACHE_RUN_ID="plain")
    assert plain["match"] and plain["fx_misses"] >= 1

    cold = run_child(script, tmp_path, "cold", daemon.url, 40, KCACHE_TORCH_BUNDLE_FRESH_COMPILE="always")
    assert cold["match"]
    assert cold["kcache"]["bundle_fresh_lookups"] >= 2  # an AOTAutograd and an FX-graph lookup at least
    assert cold["fx_misses"] >= 1 and cold["kcache"].get("fx-graph.hits", 0) == 0
    fresh = run_child(script, tmp_path, "fresh", daemon.url, 40, KCACHE_TORCH_BUNDLE_FRESH_COMPILE="always")
    assert fresh["match"] and fresh["kcache"]["bundle_hits"] == 1
    assert fresh["dynamo_cache"] == {"dynamo_cache_hit": 1} and fresh["frames"] == 0
    # A run that loads a bundle covering all its calls saves nothing, so it looks up as usual.
    assert fresh["kcache"].get("bundle_fresh_lookups", 0) == 0

    # The default ("gpu") leaves CPU graphs' lookups alone.
    default = run_child(script, tmp_path, "default", daemon.url, 24, KCACHE_RUN_ID="bundle-default")
    assert default["match"] and default["kcache"].get("bundle_fresh_lookups", 0) == 0


def test_a_bundle_of_another_version_is_a_miss_not_a_refusal(daemon, monkeypatch, caplog):
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-old-version")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    try:
        m = model()
        old = _bundles.Bundles(session)
        header = {"version": _bundle_header.BUNDLE_VERSION - 1, "system": old._system, "signatures": [_bundle_header.signature(m, {})]}
        assert session._store(old.key, _bundle_header.pack(header, b""), {"torch_cache": "compile-bundle"}, "test")
        old.start()
        with caplog.at_level(logging.WARNING, logger="kcache"):
            assert old.before_compile(m, {})  # a cold run's path
        assert session.stats["bundle_misses"] == 1 and session.stats.get("bundle_refused", 0) == 0
        assert not [r for r in caplog.records if r.name == "kcache"]  # no warning for an old bundle
        old.close()
    finally:
        session.close()


def test_only_rank_0_compiles_afresh_and_saves(daemon, monkeypatch):
    # Every rank of a job would save the same bundle: rank 1 looks up as
    # usual (sharing compiles through kcache) and saves nothing.
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-ranks")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False, bundle_fresh_compile="always"))
    try:
        m = model()
        monkeypatch.setenv("RANK", "1")
        rank1 = _bundles.Bundles(session)
        rank1.start()
        assert rank1.before_compile(m, {})  # compiles with precompile, as rank 0 does
        assert not rank1.skips_lookup([torch.zeros(1)])
        monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (b"package", object()))
        assert not rank1.save()
        assert session.stats.get("bundle_puts", 0) == 0 and session.stats.get("bundle_unsupported_puts", 0) == 0
        rank1.close()

        monkeypatch.setenv("RANK", "0")
        rank0 = _bundles.Bundles(session)
        rank0.start()
        assert rank0.before_compile(m, {})
        assert rank0.skips_lookup([torch.zeros(1)])
        rank0.close()
    finally:
        session.close()


def next_run_reads_the_marker(session: Session, m) -> None:
    """The next run of the same signatures finds the marker: precompile off,
    nothing recorded, no lookup made to miss."""
    again = _bundles.Bundles(session)
    again.start()
    assert not again.before_compile(m, {})
    assert session.stats["bundle_unsupported"] == 1
    assert not again.skips_lookup([torch.zeros(1)])
    again.close()


def test_a_run_that_cannot_save_leaves_a_marker(daemon, monkeypatch):
    # One function compiled with two settings: no bundle, and a marker, so the
    # next run of these signatures does not compile afresh again.
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-two-settings")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    try:
        m = model()
        cold = _bundles.Bundles(session)
        cold.start()
        assert cold.before_compile(m, {})
        assert cold.before_compile(m, {"mode": "max-autotune"})
        assert not cold.save()
        assert session.stats["bundle_not_saved"] == 1 and session.stats["bundle_unsupported_puts"] == 1
        cold.close()
        next_run_reads_the_marker(session, m)
    finally:
        session.close()


def test_a_bundle_kcached_refuses_leaves_a_marker(daemon, monkeypatch):
    # kcached refuses the bundle (too large, say) but takes the small marker:
    # the next run does not compile afresh for a bundle that never comes.
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-refused-put")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    try:
        m = model()
        cold = _bundles.Bundles(session)
        cold.start()
        assert cold.before_compile(m, {})
        package = b"P" * 4096
        monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (package, object()))
        monkeypatch.setattr(_bundles, "_usable_precompile_entries", lambda bundle: 1)
        store = session._store
        monkeypatch.setattr(session, "_store", lambda key, value, *rest: package not in value and store(key, value, *rest))
        assert not cold.save()
        assert session.stats["bundle_not_saved"] == 1 and session.stats["bundle_unsupported_puts"] == 1
        assert session.stats.get("bundle_puts", 0) == 0
        cold.close()
        next_run_reads_the_marker(session, m)
    finally:
        session.close()


def test_cpu_and_meta_tensors_are_not_on_an_accelerator():
    assert not _bundles._on_accelerator([torch.zeros(2), 3, None])
    assert not _bundles._on_accelerator([torch.empty(2, device="meta")])
    assert not _bundles._on_accelerator(None)


def model(width=64):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.GELU(), torch.nn.Linear(width, 8))


def test_the_signature_covers_model_kwargs_and_config():
    base = _bundle_header.signature(model(), {})
    assert _bundle_header.signature(model(), {}) == base
    assert _bundle_header.signature(model(96), {}) != base  # shapes
    assert _bundle_header.signature(model(), {"mode": "max-autotune"}) != base  # compile kwargs
    assert _bundle_header.signature(model(), {"dynamic": True}) != base
    assert _bundle_header.signature(model().eval(), {}) != base  # training flag
    # Module.compile() compiles the bound _call_impl: the same name for every model.
    bound = _bundle_header.signature(model()._call_impl, {})
    assert _bundle_header.signature(model()._call_impl, {}) == bound
    assert _bundle_header.signature(model(96)._call_impl, {}) != bound
    with torch._inductor.config.patch(max_autotune=not torch._inductor.config.max_autotune):
        assert _bundle_header.signature(model(), {})["config_sha256"] != base["config_sha256"]  # Inductor's config


def test_a_bundle_pytorch_refuses_is_logged_once_and_skipped(daemon, monkeypatch, caplog):
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-refused")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    try:
        m = model()
        sig = _bundle_header.signature(m, {})
        writer = _bundles.Bundles(session)
        header = {"version": _bundle_header.BUNDLE_VERSION, "system": _bundle_header.system(), "signatures": [sig]}
        assert session._store(writer.key, _bundle_header.pack(header, b"not a bundle"), {}, "test")

        bundles = _bundles.Bundles(session)
        bundles.start()
        with caplog.at_level(logging.WARNING, logger="kcache"):
            assert bundles.before_compile(m, {})  # refused: a cold run's path, precompile recorded anew
        assert session.stats["bundle_refused"] == 1 and session.stats.get("bundle_hits", 0) == 0
        warnings = [r for r in caplog.records if r.name == "kcache" and "not used" in r.getMessage()]
        assert len(warnings) == 1
        bundles.close()
    finally:
        session.close()


def test_a_run_pytorch_cannot_package_leaves_a_marker_the_next_run_compiles_without_precompile(
    daemon, monkeypatch, caplog
):
    monkeypatch.setenv("KCACHE_RUN_ID", "bundle-unsupported")
    session = Session(Settings(url=daemon.url, namespace="ci", prefetch=False))
    try:
        m = model()
        # The cold run: PyTorch's package holds no compiled function (as
        # 2.11 leaves a graph whose backend it did not record: "Backend not found").
        cold = _bundles.Bundles(session)
        cold.start()
        assert cold.before_compile(m, {})  # a cold run records precompile entries
        monkeypatch.setattr(torch.compiler, "save_cache_artifacts", lambda: (b"package", object()))
        monkeypatch.setattr(_bundles, "_usable_precompile_entries", lambda bundle: 0)
        assert not cold.save()
        assert session.stats["bundle_unsupported_puts"] == 1
        cold.close()

        # The next run of the same signature reads the marker: precompile off
        # (as with bundles off), nothing saved at exit, said once in the log.
        again = _bundles.Bundles(session)
        again.start()
        with caplog.at_level(logging.INFO, logger="kcache"):
            assert not again.before_compile(m, {})
        assert session.stats["bundle_unsupported"] == 1 and session.stats.get("bundle_hits", 0) == 0
        assert not again.save()
        assert session.stats["bundle_unsupported_puts"] == 1
        said = [r for r in caplog.records if r.name == "kcache" and "packaged no compiled function" in r.getMessage()]
        assert len(said) == 1
        again.close()

        # Another model under the same run: the marker is not its own.
        other = _bundles.Bundles(session)
        other.start()
        assert other.before_compile(model(48), {})
        assert session.stats["bundle_signature_mismatches"] == 1
        other.close()

        # A run with a call the marker does not cover tries that one, and
        # saves again at exit; a marker a day old is tried afresh.
        more = _bundles.Bundles(session)
        more.start()
        assert not more.before_compile(m, {})
        assert more.before_compile(torch.nn.Linear(4, 4), {})  # another function
        assert not more.save()  # PyTorch packaged nothing again (patched): a new marker
        assert session.stats["bundle_unsupported_puts"] == 2
        more.close()
        monkeypatch.setattr(_bundles, "MARKER_TTL_S", -1)
        late = _bundles.Bundles(session)
        late.start()
        assert late.before_compile(m, {})
        assert session.stats["bundle_markers_expired"] == 1
        late.close()
    finally:
        session.close()


# A model whose class is defined inside a function: PyTorch 2.11 cannot save
# its guards into a precompile package (serialize_guards raises a TypeError out
# of Dynamo, and a PackageError ends in an assertion), so under
# caching_precompile the compile itself failed. With bundles on, such a frame
# compiles without precompile and the trainer goes on.
LOCAL_CLASS_CHILD = """
import json, sys
import torch
import kcache.torch

kcache.torch.enable(url=sys.argv[1], namespace="ci", timeout_ms=2000)

def make():
    class Scale:
        factor = 2.0

    class Local(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)
            self.scale = Scale()

        def forward(self, x):
            return self.linear(x) * self.scale.factor

    return Local()

torch.manual_seed(0)
model = make()
x = torch.randn(4, 8)
got = torch.compile(model, backend="eager")(x)
print(json.dumps({"match": bool(torch.allclose(got, model(x))), "kcache": kcache.torch.stats()}))
"""


def test_a_frame_whose_guards_cannot_be_saved_compiles_without_precompile(daemon, tmp_path):
    script = tmp_path / "local_class.py"
    script.write_text(LOCAL_CLASS_CHILD)
    result = run_child(script, tmp_path, "local-class", daemon.url, 0)
    assert result["match"]
    # Nothing PyTorch could package: no bundle is saved for this run.
    assert result["kcache"].get("bundle_puts", 0) == 0
