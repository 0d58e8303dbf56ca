"""Dynamo's float specializations remembered per run (kcache.torch._tensorify)
against a real kcached: the first process restarts a frame's trace as plain
PyTorch does and stores what it specialized; the next one traces the frame
once. A record is untrusted input: a wrong one still gives eager's results,
costs one recompile and is corrected, a malformed one is refused, and
with kcached down Dynamo runs as it does without kcache."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch_support import require_torch

require_torch()

from kcache import Client  # noqa: E402
from kcache.torch import _keys, _tensorify  # noqa: E402
from kcache.torch._prefetch import fingerprint  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CHILD = "torch_floats_child.py"
RESTARTED = {"compile_attempt_0": 1, "compile_attempt_1": 1}  # plain PyTorch 2.11 on this module


def child(url: str, tmp_path: Path, run_id: str, *scales: str, **extra: str) -> dict:
    env = dict(os.environ)
    env.update(
        KCACHE_URL=url,
        KCACHE_NAMESPACE="floats",
        KCACHE_RUN_ID=run_id,
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        PYTHONPATH=os.pathsep.join([str(REPO / "client" / "python"), env.get("PYTHONPATH", "")]),
        **extra,
    )
    proc = subprocess.run(
        [sys.executable, str(HERE / CHILD), *(scales or ("3.0",))],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def record_key(monkeypatch, run_id: str) -> str:
    monkeypatch.setenv("KCACHE_RUN_ID", run_id)
    return _keys.float_specializations_entry("floats", fingerprint())


def stored(daemon, key: str) -> dict:
    raw = Client(daemon.url, fail_open=False).get(key)
    assert raw is not None
    record = _tensorify.parse(raw)
    assert record is not None
    return record


def symbol(source: str) -> str:
    """Dynamo's name for a float's symbol (ShapeEnv: sha256 of its source, mod 100)."""
    return f"zf{int(hashlib.sha256(source.encode()).hexdigest(), 16) % 100}"


def forward() -> tuple:
    source = (HERE / CHILD).read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "def forward" in text)
    return ("Gelu.forward", CHILD, line)


def test_the_next_process_traces_the_frame_once_and_matches_eager(daemon, tmp_path, monkeypatch):
    first = child(daemon.url, tmp_path, "floats-once")
    assert first["attempts"] == RESTARTED
    assert first["kcache"] == {"float_specializations_stored": 1}
    assert first["matches"] == [True]
    # The names the restart taught PyTorch, under the function: pi and the eps, not the input scale.
    record = stored(daemon, record_key(monkeypatch, "floats-once"))
    assert record == {forward(): frozenset({symbol("G['math'].pi"), symbol("L['self'].eps")})}

    second = child(daemon.url, tmp_path, "floats-once", "3.0", "4.0", "5.0")
    assert second["attempts"] == {"compile_attempt_0": 1}
    assert second["frames"] == 1  # the input scale stayed symbolic
    assert second["kcache"] == {"float_specializations_seeded": 1}  # nothing new: not stored again
    assert second["matches"] == [True, True, True]


def test_across_a_graph_break_only_the_break_s_own_restart_is_left(daemon, tmp_path):
    # The forward and the function Dynamo resumes in after the break each
    # restart for their floats; the forward restarts for the break too, which
    # clears PyTorch's set, and kcache gives its names back after that clear.
    first = child(daemon.url, tmp_path, "floats-break", "3.0", "4.0", FLOATS_GRAPH_BREAK="1")
    assert first["attempts"] == {"compile_attempt_0": 2, "compile_attempt_1": 2, "compile_attempt_2": 1}
    assert first["frames"] == 2 and first["matches"] == [True, True]
    second = child(daemon.url, tmp_path, "floats-break", "3.0", "4.0", FLOATS_GRAPH_BREAK="1")
    # Only the graph break's own restart is left.
    assert second["attempts"] == {"compile_attempt_0": 2, "compile_attempt_1": 1}
    assert second["frames"] == 2 and second["matches"] == [True, True]
    assert second["kcache"] == {"float_specializations_seeded": 2}


def test_off_the_next_process_restarts_as_plain_pytorch(daemon, tmp_path):
    child(daemon.url, tmp_path, "floats-off")
    off = child(daemon.url, tmp_path, "floats-off", KCACHE_TORCH_FLOAT_SPECIALIZATIONS="0")
    assert off["attempts"] == RESTARTED
    assert off["kcache"] == {}


def test_a_wrong_record_costs_one_recompile_and_is_corrected(daemon, tmp_path, monkeypatch):
    # Every symbolic float of the function specialized, the input scale with
    # them: the second scale fails the guard on the first and recompiles. The
    # given names are gone by then, so the recompile runs as PyTorch alone
    # (one restart) and serves every later scale; the record keeps what that
    # restart taught, and the next process traces once with a symbolic scale.
    key = record_key(monkeypatch, "floats-wrong")
    names = frozenset(f"zf{i}" for i in range(100)) | {symbol("L['scale']")}
    Client(daemon.url).put(key, _tensorify.render({forward(): names}))
    scales = [str(float(s)) for s in range(2, 14)]
    wrong = child(daemon.url, tmp_path, "floats-wrong", *scales)
    assert wrong["matches"] == [True] * len(scales)
    assert wrong["frames"] == 2  # the seeded compile, then one recompile that serves every other scale
    # Two compiles; only the recompile restarted.
    assert wrong["attempts"] == {"compile_attempt_0": 2, "compile_attempt_1": 1}
    counters = wrong["kcache"]
    assert counters["float_specializations_seeded"] == 1 and counters["float_specializations_corrected"] == 1
    assert counters["float_specializations_stored"] >= 1  # the writer may have merged two records
    assert stored(daemon, key) == {forward(): frozenset({symbol("G['math'].pi"), symbol("L['self'].eps")})}

    after = child(daemon.url, tmp_path, "floats-wrong", "3.0", "4.0")
    assert after["attempts"] == {"compile_attempt_0": 1} and after["frames"] == 1
    assert after["kcache"] == {"float_specializations_seeded": 1}
    assert after["matches"] == [True, True]


def test_a_record_of_names_the_function_does_not_use_heals(daemon, tmp_path, monkeypatch):
    key = record_key(monkeypatch, "floats-stale")
    Client(daemon.url).put(key, _tensorify.render({forward(): frozenset({"zf1234567"})}))
    stale = child(daemon.url, tmp_path, "floats-stale")
    assert stale["attempts"] == RESTARTED and stale["matches"] == [True]
    # The unused name is gone; what the restart taught is there.
    assert stored(daemon, key) == {forward(): frozenset({symbol("G['math'].pi"), symbol("L['self'].eps")})}


def test_with_kcached_down_dynamo_restarts_as_without_kcache(tmp_path):
    down = child("http://127.0.0.1:9", tmp_path, "floats-down", "3.0", "4.0")
    assert down["attempts"] == RESTARTED
    assert down["matches"] == [True, True]
    assert down["kcache"] == {}  # nothing read, nothing stored (the put failed open)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[" * 200_000,
        b" " * (_tensorify._MAX_RECORD_BYTES + 1),
        b'{"version": 1, "frames": []}',
        b'{"version": true, "frames": []}',
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, ["x; import os"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", -1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", True, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", 7, 1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f" * 513, "m.py", 1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, [f"zf{i}" for i in range(257)]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", i, ["zf1"]] for i in range(257)]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, "zf1"]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, None]]}).encode(),
    ],
)
def test_a_malformed_record_is_refused(body):
    assert _tensorify.parse(body) is None


def test_a_malformed_stored_record_is_refused_and_the_frame_restarts(daemon, tmp_path, monkeypatch):
    key = record_key(monkeypatch, "floats-malformed")
    Client(daemon.url).put(key, b'{"version": 2, "frames": "zf1"}')
    run = child(daemon.url, tmp_path, "floats-malformed")
    assert run["attempts"] == RESTARTED
    assert run["kcache"] == {"float_specializations_refused": 1, "float_specializations_stored": 1}
    assert run["matches"] == [True]


def test_a_record_round_trips():
    record = {("M.forward", "m.py", 12): frozenset({"zf6", "zf56"}), ("f", "n.py", 3): frozenset({"zf0"})}
    assert _tensorify.parse(_tensorify.render(record)) == record
