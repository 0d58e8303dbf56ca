"""Dynamo's float specializations remembered per run (kcache.torch._tensorify)
against a real kcached: the first process restarts a frame's trace as plain
PyTorch does and stores what it specialized; the next one traces the frame
once. A record is untrusted input: a wrong one still gives eager's results,
costs one recompile and is corrected, a malformed one is refused, and
with kcached down Dynamo runs as it does without kcache."""

import collections
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
    on = child(daemon.url, tmp_path, "floats-off")
    assert on["kcache"] == {"float_specializations_stored": 1}  # a record the next process could use
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
        # A valid record, padded past the limit.
        b'{"version": 2, "frames": []}' + b" " * _tensorify._MAX_RECORD_BYTES,
        b'{"version": 1, "frames": []}',
        b'{"version": true, "frames": []}',
        b'{"version": 2.0, "frames": []}',
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, ["x; import os"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", -1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", True, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 2**31, ["zf1"]]]}).encode(),
        b'{"version": 2, "frames": [["f", "m.py", ' + b"9" * 4000 + b', ["zf1"]]]}',
        json.dumps({"version": 2, "frames": [["f", 7, 1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f" * 511, "m.py", 1, ["zf1"]]]}).encode(),
        # 128 characters, 514 bytes as JSON: bounds count what render() writes.
        json.dumps({"version": 2, "frames": [["\U0001f600" * 128, "m.py", 1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "\x01" * 86, 1, ["zf1"]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, [f"zf{i}" for i in range(257)]]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", i, ["zf1"]] for i in range(257)]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, "zf1"]]}).encode(),
        json.dumps({"version": 2, "frames": [["f", "m.py", 1, None]]}).encode(),
    ],
)
def test_a_malformed_record_is_refused(body):
    assert _tensorify.parse(body) is None


def test_a_long_integer_is_refused_before_python_converts_it(monkeypatch):
    # Converting n digits costs O(n^2), inside Dynamo's first compile, where
    # an application lifted Python's 4,300-digit limit.
    converted = []
    monkeypatch.setattr(_tensorify, "int", lambda digits: converted.append(digits) or int(digits), raising=False)
    body = b'{"version": 2, "frames": [["f", "m.py", ' + b"9" * 4000 + b', ["zf1"]]]}'
    assert _tensorify.parse(body) is None
    assert converted == ["2"]  # the version alone


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


def longest_name_parse_accepts(char: str) -> str:
    def accepted(name: str) -> bool:
        return _tensorify.parse(_tensorify.render({(name, "m.py", 1): frozenset({"zf1"})})) is not None

    return char * max(k for k in range(1, 1025) if accepted(char * k))


def test_the_largest_record_parses():
    # Every bound at once, with the names parse() accepts that cost most as
    # JSON: what a process writes, the next one reads (else each would learn
    # and write again).
    names = frozenset(f"zf{9_999_999 - i}" for i in range(_tensorify._MAX_NAMES))
    for char in ("f", "\x01", "\u0080", "\U0001f600"):
        widest = longest_name_parse_accepts(char)
        record = {(widest, widest, 2**31 - 1 - i): names for i in range(_tensorify._MAX_FRAMES)}
        body = _tensorify.render(record)
        assert len(body) <= _tensorify._MAX_RECORD_BYTES, (repr(char), len(body))
        assert _tensorify.parse(body) == record


def f():
    pass


def g():
    pass


def code_id(fn) -> tuple:
    return (fn.__qualname__, Path(fn.__code__.co_filename).name, fn.__code__.co_firstlineno)


class Recorder:
    """FloatSpecializations with a record in memory, its compiles driven by
    hand the way its wrappers around Dynamo report them."""

    def __init__(self, record: dict):
        self.stored: list[bytes] = []
        self.stats: collections.Counter = collections.Counter()
        self.floats = _tensorify.FloatSpecializations(
            lambda: _tensorify.render(record), lambda body: self.stored.append(body) or True, self.stats
        )
        self.specializations: set[str] = set()  # TensorifyState.force_specializations

    def compile(self, fn, first: bool, asks=frozenset(), learns=frozenset(), inside=None) -> set[str]:
        """One compile of fn: Dynamo asks about names (finding those set),
        then learns names by restarting, then runs inside() (a nested
        compile). Returns the set during the compile."""
        with self.floats.compiling(fn.__code__, first, self.specializations) as started:
            during = set(self.specializations)
            started.used.update(n for n in asks if n in self.specializations)  # what asked() notes
            started.learned.update(learns)  # what learn() notes
            self.specializations.update(learns)
            if inside is not None:
                inside()
        return during

    def last_stored(self) -> dict:
        self.floats.flush()
        return _tensorify.parse(self.stored[-1]) if self.stored else None


def test_a_name_pytorch_learned_for_one_function_is_not_dropped_from_another():
    # Two functions share a float's name (the same source: a module's eps).
    # After a wrong given name made both recompile, PyTorch learns the shared
    # name in the first one's recompile; the second finds it set and learns
    # nothing, and still needs it.
    shared = symbol("L['self'].eps")
    r = Recorder({code_id(f): frozenset({shared, "zf1"}), code_id(g): frozenset({shared, "zf1"})})
    assert r.compile(f, first=True, asks={shared, "zf1"}) == {shared, "zf1"}
    assert r.compile(g, first=True, asks={shared, "zf1"}) == {shared, "zf1"}
    assert r.specializations == set()  # given for first compiles only
    assert r.compile(f, first=False, learns={shared}) == set()
    assert r.compile(g, first=False, asks={shared}) == {shared}
    assert r.last_stored() == {code_id(f): frozenset({shared}), code_id(g): frozenset({shared})}
    assert r.stats["float_specializations_corrected"] == 2 and r.stats["float_specializations_seeded"] == 2


def test_a_recompile_that_changes_nothing_corrects_nothing():
    shared = symbol("L['self'].eps")
    r = Recorder({code_id(f): frozenset({shared})})
    r.compile(f, first=True, asks={shared})
    r.compile(f, first=False, learns={shared})  # e.g. a new shape: PyTorch restarts again, as it would alone
    assert r.stats["float_specializations_corrected"] == 0
    assert r.last_stored() is None  # the record stands as it was read: nothing written


def test_a_function_needing_more_names_than_a_record_holds_loses_its_entry():
    r = Recorder({code_id(f): frozenset({"zf1"})})
    r.compile(f, first=True, learns={f"zf{i}" for i in range(_tensorify._MAX_NAMES + 1)})
    assert r.last_stored() == {}  # not the stale {zf1}


def test_a_full_record_makes_way_for_a_function_compiled_now():
    # 256 functions of an earlier version of the code (lines moved since).
    old = {("f", "gone.py", line): frozenset({"zf1"}) for line in range(_tensorify._MAX_FRAMES)}
    r = Recorder(old)
    r.compile(f, first=True, learns={"zf2"})
    record = r.last_stored()
    assert len(record) == _tensorify._MAX_FRAMES and record[code_id(f)] == {"zf2"}
    r.compile(g, first=True, learns={"zf3"})
    assert r.last_stored()[code_id(g)] == {"zf3"} and r.last_stored()[code_id(f)] == {"zf2"}


def test_a_full_record_of_functions_compiled_now_keeps_its_entries():
    everything = {("f", "m.py", line): frozenset({"zf1"}) for line in range(_tensorify._MAX_FRAMES)}
    r = Recorder(everything)
    for line in range(_tensorify._MAX_FRAMES):  # each of them compiled in this process
        r.floats._own_for[("f", "m.py", line)] = set()
    r.compile(f, first=True, learns={"zf2"})
    assert r.last_stored() is None  # f waits: no entry of this process makes way


def test_a_name_given_to_an_outer_compile_is_not_the_inner_function_s():
    # Dynamo's compile lock is reentrant: g compiles inside f's compile and
    # finds f's given name set. It is f's; g's entry never takes it.
    r = Recorder({code_id(f): frozenset({"zf7"}), code_id(g): frozenset({"zf9"})})
    seen = {}
    r.compile(f, first=True, asks={"zf7"}, inside=lambda: seen.update(
        g=r.compile(g, first=True, asks={"zf7", "zf9"})))
    assert seen["g"] == {"zf7", "zf9"}
    assert r.specializations == set()
    r.compile(g, first=False)  # g's given name was wrong: it recompiles, needing nothing
    assert r.last_stored() == {code_id(f): frozenset({"zf7"})}


def test_a_graph_break_in_an_inner_compile_keeps_the_outer_s_names():
    # Dynamo clears its set when it restarts for a graph break; the installed
    # clear puts back the names given to this compile and to those around it.
    from torch._dynamo.symbolic_convert import TensorifyState

    r = Recorder({code_id(f): frozenset({"zf7"}), code_id(g): frozenset({"zf9"})})
    names = TensorifyState.force_specializations
    assert names == set()
    undo = r.floats.install()
    try:
        with r.floats.compiling(f.__code__, True, names):
            with r.floats.compiling(g.__code__, True, names):
                assert names == {"zf7", "zf9"}
                TensorifyState.clear()
                assert names == {"zf7", "zf9"}
            assert names == {"zf7"}
            TensorifyState.clear()
            assert names == {"zf7"}
        assert names == set()
        names.add("zf1")
        TensorifyState.clear()  # outside any compile: PyTorch's own clear
        assert names == set()
    finally:
        undo()
        names.clear()
