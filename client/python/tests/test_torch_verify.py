"""kcache.torch with verify_signatures: an entry not signed by a trusted key
never reaches Inductor, so its pickle is never loaded (issue 14)."""

import base64
import json
import pickle

import pytest

from torch_support import require_torch

require_torch()

from kcache.torch import Settings  # noqa: E402
from kcache.torch._session import Session  # noqa: E402
from kcache.torch.inductor_backend import KcacheInductorBackend  # noqa: E402

FX_KEY = "pt2:fx-graph-v1::fverify:c1"
UNPICKLED = []


def _mark_unpickled():
    UNPICKLED.append(True)
    return "payload"


class Payload:
    """A pickle that records being loaded: what a forged entry would run."""

    def __reduce__(self):
        return (_mark_unpickled, ())


def inductor_load(data):
    # What Inductor does with a hit: decode its JSON, unpickle the bytes.
    return pickle.loads(base64.b64decode(json.loads(data)["data"]))


def backend(url, **settings):
    session = Session(Settings(url=url, namespace="test", **settings))
    return KcacheInductorBackend(session, "fx-graph", False), session


def test_an_entry_from_an_untrusted_key_is_never_unpickled(daemon, keys):
    writer, _ = backend(daemon.url)
    value = json.dumps({"data": base64.b64encode(pickle.dumps(Payload())).decode(), "time_taken_ms": 1})
    writer.put(FX_KEY, value.encode())
    UNPICKLED.clear()

    untrusting, session = backend(daemon.url, verify_signatures=True, trusted_keys=keys[1])
    data = untrusting.get(FX_KEY)
    assert data is None  # a miss: Inductor compiles instead
    if data is not None:
        inductor_load(data)
    assert UNPICKLED == []
    assert session.client.verification_stats()["rejected"]["unknown-key"] == 1
    assert session.stats["fx-graph.hits"] == 0

    # The control: trusting the daemon's key, the same entry loads.
    trusting, session = backend(daemon.url, verify_signatures=True, trusted_keys=keys[0])
    assert inductor_load(trusting.get(FX_KEY)) == "payload"
    assert UNPICKLED == [True]
    assert session.client.verification_stats()["verified"] == 1


def test_verification_settings_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KCACHE_VERIFY_SIGNATURES", "true")
    monkeypatch.setenv("KCACHE_TRUSTED_KEYS", str(tmp_path / "keys.pem"))
    settings = Settings.from_env()
    assert settings.verify_signatures is True
    assert settings.trusted_keys == str(tmp_path / "keys.pem")
    env = settings.environment()
    assert env["KCACHE_VERIFY_SIGNATURES"] == "1"  # what compile workers read back
    monkeypatch.setenv("KCACHE_VERIFY_SIGNATURES", "0")
    assert Settings.from_env().verify_signatures is False
    monkeypatch.setenv("KCACHE_VERIFY_SIGNATURES", "maybe")
    with pytest.raises(ValueError):
        Settings.from_env()


def test_verification_on_without_a_key_fails_the_session(daemon):
    # Never a session that silently hands Inductor unverified bytes.
    with pytest.raises(Exception):
        Session(Settings(url=daemon.url, namespace="test", verify_signatures=True))
