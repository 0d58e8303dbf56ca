"""Fixtures: a real kcached on a free port with a temporary data dir."""

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# Scalar C++ kernels in every torch test and in the trainer processes the tests
# start (they inherit this environment): Inductor's vector-ISA probe and
# vectorized kernels cost a CPU trainer 2-3x its compile time on a 2-core CI
# machine (a bundle test: 81 s, 28 s without), and no test here is about the
# kernels' code. Set before any test module imports torch, which reads it then.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")


def _kcached() -> str:
    env = os.environ.get("KCACHED")
    if env:
        return env
    for build in ("build/asan", "build/release", "build"):
        path = REPO / build / "service" / "kcached"
        if path.exists():
            return str(path)
    raise RuntimeError("kcached not built: run scripts/setup (or set KCACHED)")


class Daemon:
    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.proc = None
        self.url = None

    def start(self) -> "Daemon":
        port_file = self.data_dir / "port"
        port_file.unlink(missing_ok=True)
        self.log = open(self.data_dir / "kcached.log", "ab")
        args = [_kcached(), "--listen", "127.0.0.1:0", "--data-dir", str(self.data_dir / "data"),
                "--port-file", str(port_file), "--threads", "2", "--log-level", "warn"]
        if not os.environ.get("KCACHE_WORKER_BINARY"):
            # kcached finds the kcache-worker of its own build, maybe a sanitized
            # one, which cannot run under an address-space limit.
            args += ["--worker-memory", "0"]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("kcached did not start; see " + str(self.data_dir / "kcached.log"))
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        return self

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.log.close()


@pytest.fixture
def daemon():
    with tempfile.TemporaryDirectory(prefix="kcache-py-") as tmp:
        d = Daemon(Path(tmp)).start()
        try:
            yield d
        finally:
            d.stop()


def public_key(private_pem, out):
    subprocess.run(["openssl", "pkey", "-in", str(private_pem), "-pubout", "-out", str(out)], check=True)
    return str(out)


@pytest.fixture
def keys(daemon, tmp_path):
    """(the daemon's public key, a public key it never signed with)."""
    other = tmp_path / "other-private.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(other)], check=True)
    return (
        public_key(daemon.data_dir / "data" / "signing.pem", tmp_path / "daemon.pem"),
        public_key(other, tmp_path / "other.pem"),
    )
