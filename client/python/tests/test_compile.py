"""Compile jobs through the Python client: submit, wait, get_or_compile."""

import ctypes
import http.server
import json
import os
import tempfile
import threading
import time

import pytest

import kcache

AXPY = {
    "backend": "cpp",
    "source": {
        "name": "axpy.cpp",
        "text": 'extern "C" void axpy(float a, const float* x, float* y, int n) {\n'
        "  for (int i = 0; i < n; ++i) y[i] += a * x[i];\n}\n",
    },
    "name_expressions": ["axpy"],
    "options": ["-O2"],
    "target": "x86-64-v2",
    "output": "shared",
}


def test_get_or_compile_compiles_then_hits(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    first = c.get_or_compile("py-axpy", AXPY)
    assert first.outcome == "compiled", first.info
    assert first.binary.startswith(b"\x7fELF")
    assert first.lowered_names == {"axpy": "axpy"}

    # The shared object from the cache loads and computes.
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(first.binary)
        f.flush()
        lib = ctypes.CDLL(f.name)
        x = (ctypes.c_float * 3)(1, 2, 3)
        y = (ctypes.c_float * 3)(10, 20, 30)
        lib.axpy(ctypes.c_float(2), x, y, 3)
        assert list(y) == [12, 24, 36]

    second = c.get_or_compile("py-axpy", AXPY)
    assert second.outcome == "hit"
    assert second.binary == first.binary


def test_async_policy_returns_at_once_and_a_later_call_hits(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    spec = dict(AXPY, options=["-O1"])
    pending = c.get_or_compile("py-async", spec, wait=False)
    assert pending.outcome == "pending"
    assert pending.binary is None
    job = c.wait(pending.job["id"], timeout_s=60)
    assert job["state"] == "succeeded", job
    assert c.get_or_compile("py-async", spec, wait=False).outcome == "hit"


def test_compile_errors_come_back_with_the_log(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    broken = dict(AXPY, source={"name": "bad.cpp", "text": "int f() { return nope; }"})
    result = c.get_or_compile("py-broken", broken)
    assert result.outcome == "failed"
    assert "nope" in result.job["log"]
    again = c.submit(broken, key="py-broken")
    assert again["status"] == "failed-recently"


def test_compile_fails_open_without_a_daemon():
    c = kcache.Client("http://127.0.0.1:1", timeout_ms=300)
    result = c.get_or_compile("py-nowhere", AXPY)
    assert result.outcome == "error" and result.binary is None
    assert c.errors == 1


def test_a_submission_with_a_manifest_publishes_under_its_key_in_its_namespace(daemon):
    c = kcache.Client(daemon.url, fail_open=False)
    manifest = {
        "schema_version": 2,
        "namespace": "team-py/train",
        "graph_digest": "e" * 64,
        "guards": [],
        "hardware_class": "cpu",
        "toolchain": {},
        "options": [],
        "salt": "py-manifest",
    }
    # No key: the manifest names it (kcached derives it).
    answer = c.submit(dict(AXPY, options=["-O3"]), manifest=manifest)
    assert "client_key_refused" not in answer, answer
    key = next(k for k in answer["published_under"] if k.startswith("kc1-"))
    assert c.wait(answer["job"]["id"], timeout_s=60)["state"] == "succeeded"
    _, record = c.get_entry(key)
    assert record["namespace"] == "team-py/train"
    assert record["manifest"]["namespace"] == "team-py/train"
    # One that does not hash to the key is refused.
    with pytest.raises(kcache.KcacheError, match="not to the key"):
        c.submit(AXPY, key="kc1-" + "0" * 64, manifest=manifest)


class _ScriptedDaemon(http.server.BaseHTTPRequestHandler):
    """kcached as get_or_compile sees it when the cluster queue's Redis stops
    answering for a moment: a miss, a queued job, one poll answered 503 (the
    job cannot be read now), then the job, failed."""

    polls: list = []
    unreadable = 1  # how many polls answer 503 before the job is read

    def _answer(self, status: int, body: dict, headers: dict | None = None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path.startswith("/v1/artifacts/"):
            return self._answer(404, {"error": "not found"})
        if self.path.startswith("/v1/jobs/j-1"):
            self.polls.append(self.path)
            if len(self.polls) <= self.unreadable:
                return self._answer(503, {"error": "job j-1 cannot be read now; retry"}, {"Retry-After": "1"})
            job = {"id": "j-1", "compile_key": "ck", "state": "failed", "error": {"code": "compile-failed", "message": "boom"}}
            return self._answer(200, job)
        return self._answer(404, {"error": "no route"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        return self._answer(202, {"status": "queued", "job": {"id": "j-1", "compile_key": "ck", "state": "queued"}})

    def log_message(self, *args):  # quiet
        pass


def _scripted_daemon(unreadable: int) -> http.server.ThreadingHTTPServer:
    _ScriptedDaemon.polls = []
    _ScriptedDaemon.unreadable = unreadable
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedDaemon)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_job_kcached_cannot_read_for_a_moment_is_polled_again_not_given_up():
    server = _scripted_daemon(unreadable=1)
    try:
        c = kcache.Client(f"http://127.0.0.1:{server.server_address[1]}", fail_open=False)
        result = c.get_or_compile("py-unreadable-job", AXPY, timeout_s=20)
        # The 503 did not end the wait: the next poll saw the job's end.
        assert len(_ScriptedDaemon.polls) == 2, _ScriptedDaemon.polls
        assert result.outcome == "failed", (result.outcome, c.last_error)
    finally:
        server.shutdown()
        server.server_close()


def test_a_job_kcached_cannot_read_until_the_wait_ends_is_pending_at_its_end():
    server = _scripted_daemon(unreadable=10**6)
    try:
        c = kcache.Client(f"http://127.0.0.1:{server.server_address[1]}", fail_open=False)
        started = time.monotonic()
        result = c.get_or_compile("py-unreadable-job", AXPY, timeout_s=2)
        waited = time.monotonic() - started
        # Not an error, and not past the caller's wait: pending, as a job still running is.
        assert result.outcome == "pending", (result.outcome, c.last_error)
        assert 1.0 <= waited < 4.0, waited
        assert 2 <= len(_ScriptedDaemon.polls) <= 6, _ScriptedDaemon.polls
    finally:
        server.shutdown()
        server.server_close()
