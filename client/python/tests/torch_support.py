"""torch for the kcache.torch tests: CI installs it (scripts/setup --torch);
elsewhere the tests skip, unless KCACHE_REQUIRE_TORCH=1 makes its absence a failure."""

import os

import pytest


def require_torch():
    if os.environ.get("KCACHE_REQUIRE_TORCH") == "1":
        import torch  # noqa: F401  (an ImportError fails the test)

        return
    pytest.importorskip("torch", reason="torch is not installed (scripts/setup --torch installs it)")
