"""End-to-end signature verification in the Python client (issue 14), against
a real kcached: entries signed by the daemon's key verify when that key is
trusted, and are misses (counted by reason) for a client that trusts another."""

import json

import pytest

import kcache


def test_entries_signed_by_a_trusted_key_verify(daemon, keys):
    kcache.Client(daemon.url, fail_open=False).put("kc1-py-a", b"genuine")
    trainer = kcache.Client(daemon.url, fail_open=False, verify_signatures=True, trusted_keys=keys[0])
    assert trainer.get("kc1-py-a") == b"genuine"
    assert trainer.get_entry("kc1-py-a")[0] == b"genuine"
    assert trainer.batch_get(["kc1-py-a", "kc1-py-missing"]) == [b"genuine", None]
    stats = trainer.verification_stats()
    assert stats["enabled"] and stats["verified"] == 3 and stats["rejected_total"] == 0


def test_a_record_verified_once_is_not_verified_again(daemon, keys):
    kcache.Client(daemon.url, fail_open=False).put("kc1-py-cached", b"again")
    trainer = kcache.Client(daemon.url, fail_open=False, verify_signatures=True, trusted_keys=keys[0])
    for _ in range(3):
        assert trainer.get("kc1-py-cached") == b"again"
    stats = trainer.verification_stats()
    # One Ed25519 check; the files are still hashed on every get.
    assert stats["verified"] == 3 and stats["cache_misses"] == 1 and stats["cache_hits"] == 2


def test_entries_signed_by_another_key_are_misses(daemon, keys):
    kcache.Client(daemon.url, fail_open=False).put("kc1-py-a", b"not for you")
    trainer = kcache.Client(daemon.url, fail_open=False, verify_signatures=True, trusted_keys=[keys[1]])
    assert trainer.get("kc1-py-a") is None
    assert trainer.get_entry("kc1-py-a") is None
    assert trainer.batch_get(["kc1-py-a"]) == [None]
    stats = trainer.verification_stats()
    assert stats["verified"] == 0
    assert stats["rejected"]["unknown-key"] == 3
    assert stats["last_rejection"].startswith("kc1-py-a: unknown-key")
    assert trainer.errors == 0  # a refused entry is a miss, not an error
    # A client that does not verify still gets it: the refusal is the trainer's.
    assert kcache.Client(daemon.url).get("kc1-py-a") == b"not for you"


def test_verification_from_the_environment(daemon, keys, monkeypatch):
    kcache.Client(daemon.url, fail_open=False).put("kc1-py-env", b"v")
    monkeypatch.setenv("KCACHE_VERIFY_SIGNATURES", "1")
    monkeypatch.setenv("KCACHE_TRUSTED_KEYS", keys[1] + ":" + keys[0])  # rotation: either key
    trainer = kcache.Client(daemon.url, fail_open=False)
    assert trainer.get("kc1-py-env") == b"v"
    assert trainer.verification_stats()["verified"] == 1
    monkeypatch.setenv("KCACHE_TRUSTED_KEYS", keys[1])
    assert kcache.Client(daemon.url).get("kc1-py-env") is None
    # An explicit verify_signatures=False wins over the environment.
    assert kcache.Client(daemon.url, verify_signatures=False).get("kc1-py-env") == b"v"


def test_verification_without_a_usable_key_refuses_to_open(daemon, tmp_path):
    with pytest.raises(kcache.KcacheError):
        kcache.Client(daemon.url, verify_signatures=True)
    with pytest.raises(kcache.KcacheError):
        kcache.Client(daemon.url, verify_signatures=True, trusted_keys=str(tmp_path / "absent.pem"))
    assert kcache.Client(daemon.url).verification_stats()["enabled"] is False


def test_a_caller_built_before_the_verification_fields_gets_them_from_the_environment(daemon, keys, monkeypatch):
    # kcache_options_ext grows at its end: a struct_size that stops before
    # trusted_keys must leave those fields unread (env instead).
    import ctypes

    from kcache._native import Buffer, Options, OptionsExt, load_library, take

    kcache.Client(daemon.url, fail_open=False).put("kc1-py-abi", b"v")
    monkeypatch.setenv("KCACHE_VERIFY_SIGNATURES", "1")
    monkeypatch.setenv("KCACHE_TRUSTED_KEYS", keys[1])
    lib = load_library()
    opts = Options(daemon.url.encode(), None, 2000, 1)
    ext = OptionsExt(OptionsExt.trusted_keys.offset, None, None, None, keys[0].encode(), 1)
    handle = ctypes.c_void_p()
    assert lib.kcache_client_open_ext(ctypes.byref(opts), ctypes.byref(ext), ctypes.byref(handle)) == 0
    try:
        value = Buffer()
        assert lib.kcache_get(handle, b"kc1-py-abi", ctypes.byref(value)) == 1  # MISS: env's key only
        stats = Buffer()
        assert lib.kcache_verification_stats(handle, ctypes.byref(stats)) == 0
        assert json.loads(take(lib, stats))["rejected"]["unknown-key"] == 1
    finally:
        lib.kcache_client_close(handle)
