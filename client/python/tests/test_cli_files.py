"""Issue 17's CLI and daemon bugs, each with its regression test: `kcache get
-o` into a missing directory fails (exit 4, nothing written) instead of
claiming it wrote; files are replaced whole; an IPv6 literal works as a
daemon listen address and as a client URL; a port with trailing junk is
refused at start-up."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, _kcached


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    binary = os.environ.get("KCACHE_CLI") or str(REPO / "build" / "release" / "client" / "kcache")
    return subprocess.run([binary, "--url", url, *args], capture_output=True, text=True, timeout=60)


def start(tmp_path: Path, listen: str) -> tuple[subprocess.Popen, Path]:
    port = tmp_path / "port"
    proc = subprocess.Popen([_kcached(), "--listen", listen, "--data-dir", str(tmp_path / "data"),
                             "--port-file", str(port), "--workers", "0", "--log-level", "warn"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, port


def test_get_into_a_missing_directory_fails_and_writes_nothing(daemon, tmp_path):
    source = tmp_path / "kernel.bin"
    source.write_bytes(b"\x7fELF kernel")
    assert cli(daemon.url, "put", "kc-cli-file", str(source)).returncode == 0
    missing = tmp_path / "no" / "such" / "dir" / "out.bin"
    got = cli(daemon.url, "get", "kc-cli-file", "-o", str(missing))
    assert got.returncode == 4, got.stderr
    assert "cannot write" in got.stderr and str(missing) in got.stderr and "wrote" not in got.stderr
    assert not missing.parent.exists()

    # An existing file is replaced whole, and no temporary file stays behind.
    out = tmp_path / "out.bin"
    out.write_bytes(b"old contents, longer than the new ones")
    got = cli(daemon.url, "get", "kc-cli-file", "-o", str(out))
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == b"\x7fELF kernel"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.bin")) == []


def test_an_ipv6_literal_works_as_listen_address_and_url(tmp_path):
    proc, port = start(tmp_path, "[::1]:0")
    try:
        deadline = time.monotonic() + 30
        while not port.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is not None:
            output = proc.stdout.read()
            if "Address family not supported" in output or "Cannot assign requested address" in output:
                pytest.skip("no IPv6 loopback on this host: " + output.strip())
            raise AssertionError(output)
        url = f"http://[::1]:{port.read_text().strip()}"
        source = tmp_path / "v"
        source.write_bytes(b"over IPv6")
        assert cli(url, "put", "kc-ipv6", str(source)).returncode == 0
        got = cli(url, "get", "kc-ipv6")
        assert got.returncode == 0 and got.stdout == "over IPv6", got.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_listen_port_with_trailing_junk_stops_start_up(tmp_path):
    proc, _ = start(tmp_path, "127.0.0.1:7070x")
    assert proc.wait(timeout=30) != 0
    assert "bad port" in proc.stdout.read()
