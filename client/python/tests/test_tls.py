"""The Python client over https:// against a real kcached serving TLS, with
throwaway certificates made by the openssl CLI (issue 14)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import kcache

from conftest import _kcached

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")

_CONFIG = """[req]
distinguished_name = dn
[dn]
[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
[server_ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
"""


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d: Path, name: str) -> dict:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate."""
    cfg = d / f"{name}.cnf"
    cfg.write_text(_CONFIG)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    f = {k: str(d / f"{name}-{k}") for k in ("ca.pem", "ca.key", "server.pem", "server.key",
                                            "client.pem", "client.key")}
    _openssl("req", "-x509", *ec, "-keyout", f["ca.key"], "-out", f["ca.pem"], "-days", "2",
             "-subj", f"/CN={name} CA", "-config", str(cfg), "-extensions", "ca_ext")
    for serial, leaf in enumerate(("server", "client"), start=2):
        csr = str(d / f"{name}-{leaf}.csr")
        _openssl("req", "-new", *ec, "-keyout", f[f"{leaf}.key"], "-out", csr, "-subj",
                 f"/CN={'localhost' if leaf == 'server' else name}", "-config", str(cfg))
        _openssl("x509", "-req", "-in", csr, "-CA", f["ca.pem"], "-CAkey", f["ca.key"],
                 "-set_serial", str(serial), "-days", "2", "-out", f[f"{leaf}.pem"],
                 "-extfile", str(cfg), "-extensions", f"{leaf}_ext")
    return f


@pytest.fixture
def tls_daemon():
    """kcached serving TLS with client certificates required (mTLS)."""
    with tempfile.TemporaryDirectory(prefix="kcache-py-tls-") as tmp:
        d = Path(tmp)
        certs = make_certs(d, "main")
        port_file = d / "port"
        log = open(d / "kcached.log", "ab")
        proc = subprocess.Popen(
            [_kcached(), "--listen", "127.0.0.1:0", "--data-dir", str(d / "data"), "--port-file",
             str(port_file), "--threads", "2", "--log-level", "warn", "--workers", "0",
             "--tls-cert", certs["server.pem"], "--tls-key", certs["server.key"],
             "--tls-client-ca", certs["ca.pem"]],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists():
                assert proc.poll() is None and time.monotonic() < deadline, "kcached did not start"
                time.sleep(0.02)
            port = port_file.read_text().strip()
            yield f"https://127.0.0.1:{port}", certs, d
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()


def test_round_trip_over_https_with_a_client_certificate(tls_daemon):
    url, certs, _ = tls_daemon
    c = kcache.Client(url, fail_open=False, ca_file=certs["ca.pem"],
                      client_cert=certs["client.pem"], client_key=certs["client.key"])
    payload = os.urandom(200_000)
    assert c.put("py-tls", payload)
    assert c.get("py-tls") == payload
    assert c.batch_get(["py-tls", "py-missing"]) == [payload, None]
    assert c.exists("py-tls")


def test_ca_and_client_certificate_from_the_environment(tls_daemon, monkeypatch):
    url, certs, _ = tls_daemon
    monkeypatch.setenv("KCACHE_URL", url)
    monkeypatch.setenv("KCACHE_CA_FILE", certs["ca.pem"])
    monkeypatch.setenv("KCACHE_CLIENT_CERT", certs["client.pem"])
    monkeypatch.setenv("KCACHE_CLIENT_KEY", certs["client.key"])
    c = kcache.Client(fail_open=False)
    assert c.put("py-env", b"v")
    assert c.get("py-env") == b"v"


def test_untrusted_server_and_missing_client_certificate_are_refused(tls_daemon):
    url, certs, d = tls_daemon
    other = make_certs(d, "other")
    untrusted = kcache.Client(url, fail_open=False, retries=0, ca_file=other["ca.pem"],
                              client_cert=certs["client.pem"], client_key=certs["client.key"])
    with pytest.raises(kcache.KcacheError, match="certificate"):
        untrusted.get("k")
    anonymous = kcache.Client(url, fail_open=False, retries=0, ca_file=certs["ca.pem"])
    with pytest.raises(kcache.KcacheError):
        anonymous.get("k")
    # Fail-open (the default): a miss, counted, never an exception.
    quiet = kcache.Client(url, retries=0, ca_file=certs["ca.pem"])
    assert quiet.get("k") is None
    assert quiet.errors == 1


def test_plain_http_against_the_tls_port_fails_cleanly(tls_daemon):
    url, _, _ = tls_daemon
    c = kcache.Client(url.replace("https://", "http://"), fail_open=False, timeout_ms=3000)
    start = time.monotonic()
    with pytest.raises(kcache.KcacheError):
        c.get("k")
    assert time.monotonic() - start < 2.5


def test_bad_ca_file_is_refused_at_open(tls_daemon):
    url, _, d = tls_daemon
    with pytest.raises(kcache.KcacheError, match="CA file"):
        kcache.Client(url, ca_file=str(d / "missing.pem"))
