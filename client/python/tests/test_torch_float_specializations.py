"""Dynamo's float specializations remembered per run (kcache.torch._tensorify)
against a real kcached: the first process restarts a frame's trace as plain
PyTorch does and stores what it specialized; the next one traces the frame
once. A record is untrusted input: a wrong one still gives eager's results,
a malformed one is refused."""

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


def child(daemon, tmp_path: Path, run_id: str, *scales: str, **extra: str) -> dict:
    env = dict(os.environ)
    env.update(
        KCACHE_URL=daemon.url,
        KCACHE_NAMESPACE="floats",
        KCACHE_RUN_ID=run_id,
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        PYTHONPATH=os.pathsep.join([str(REPO / "client" / "python"), env.get("PYTHONPATH", "")]),
        **extra,
    )
    proc = subprocess.run(
        [sys.executable, str(HERE / "torch_floats_child.py"), *(scales or ("3.0",))],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def record_key(monkeypatch, run_id: str) -> str:
    monkeypatch.setenv("KCACHE_RUN_ID", run_id)
    return _keys.float_specializations_entry("floats", fingerprint())


def test_the_next_process_traces_the_frame_once_and_matches_eager(daemon, tmp_path):
    first = child(daemon, tmp_path, "floats-once")
    # Plain PyTorch 2.11: the tensorify pass restarts the trace once.
    assert first["attempts"] == {"compile_attempt_0": 1, "compile_attempt_1": 1}
    assert first["kcache"] == {"float_specializations_stored": 1}
    assert first["matches"] == [True]

    second = child(daemon, tmp_path, "floats-once")
    assert second["attempts"] == {"compile_attempt_0": 1}
    assert second["kcache"] == {"float_specializations_seeded": 1}  # nothing new: not stored again
    assert second["matches"] == [True]


def test_off_the_next_process_restarts_as_plain_pytorch(daemon, tmp_path):
    child(daemon, tmp_path, "floats-off")
    off = child(daemon, tmp_path, "floats-off", KCACHE_TORCH_FLOAT_SPECIALIZATIONS="0")
    assert off["attempts"] == {"compile_attempt_0": 1, "compile_attempt_1": 1}
    assert off["kcache"] == {}


def test_a_wrong_record_costs_recompiles_never_a_wrong_result(daemon, tmp_path, monkeypatch):
    # Every symbolic float of the frame specialized, the input scale with them
    # (Dynamo names a float zf<sha256 of its source % 100>): each new scale is
    # a guard failure and a recompile, and eager's result.
    key = record_key(monkeypatch, "floats-wrong")
    scale = int(hashlib.sha256(b"L['scale']").hexdigest(), 16) % 100
    names = frozenset(f"zf{i}" for i in range(100)) | {f"zf{scale}"}
    record = _tensorify.render({("Gelu.forward", "torch_floats_child.py", first_line(), 0): names})
    Client(daemon.url).put(key, record)
    wrong = child(daemon, tmp_path, "floats-wrong", "3.0", "4.0", "3.0")
    assert wrong["matches"] == [True, True, True]
    assert wrong["kcache"].get("float_specializations_seeded") == 1
    assert wrong["frames"] == 2  # scale 4.0 failed the guard on 3.0; 3.0 again hit the first graph


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"version": 2, "frames": []}',
        json.dumps({"version": 1, "frames": [["f", "m.py", 1, 0, ["x; import os"]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f", "m.py", -1, 0, ["zf1"]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f", "m.py", True, 0, ["zf1"]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f", 7, 1, 0, ["zf1"]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f" * 513, "m.py", 1, 0, ["zf1"]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f", "m.py", 1, 0, [f"zf{i}" for i in range(257)]]]}).encode(),
        json.dumps({"version": 1, "frames": [["f", "m.py", i, 0, ["zf1"]] for i in range(257)]}).encode(),
        json.dumps({"version": 1, "frames": [["f", "m.py", 1, 0]]}).encode(),
    ],
)
def test_a_malformed_record_is_refused(body):
    assert _tensorify.parse(body) is None


def test_a_malformed_stored_record_is_refused_and_the_frame_restarts(daemon, tmp_path, monkeypatch):
    key = record_key(monkeypatch, "floats-malformed")
    Client(daemon.url).put(key, b'{"version": 1, "frames": "zf1"}')
    run = child(daemon, tmp_path, "floats-malformed")
    assert run["attempts"] == {"compile_attempt_0": 1, "compile_attempt_1": 1}
    assert run["kcache"] == {"float_specializations_refused": 1, "float_specializations_stored": 1}
    assert run["matches"] == [True]


def test_a_record_round_trips():
    frames = {("M.forward", "m.py", 12, 0): frozenset({"zf6", "zf56"}), ("f", "n.py", 3, 1): frozenset({"zf0"})}
    assert _tensorify.parse(_tensorify.render(frames)) == frames


def first_line() -> int:
    source = (HERE / "torch_floats_child.py").read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if "def forward" in line)
