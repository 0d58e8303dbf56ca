"""Fail-open events through Python logging (logger "kcache").

A client that fails open turns every error into a miss; without a word, a
trainer whose cache went away just gets slower. This logs one WARNING per
change of state, not per call: kcached stopped answering, answers again,
verification started refusing entries (once per reason). The counters
(stats()) keep counting every call.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

logger = logging.getLogger("kcache")


def _who() -> str:
    # Under torchrun every rank logs the same events: say which rank did.
    rank = os.environ.get("RANK")
    return f"kcache (rank {rank})" if rank is not None else "kcache"


class FailOpenLog:
    """The state one client's fail-open events are logged against; thread-safe."""

    def __init__(self, url: str):
        self._url = url
        self._lock = threading.Lock()
        self._failing = False
        self._failures = 0
        self._rejections: dict[str, int] = {}

    @property
    def failing(self) -> bool:
        return self._failing

    def observe(self, failed: bool, error: str = "") -> None:
        """One call's outcome: failed means kcached did not answer it (an
        error, not a miss)."""
        with self._lock:
            if failed:
                self._failures += 1
                if self._failing:
                    return
                self._failing = True
            elif not self._failing:
                return
            else:
                self._failing = False
                failures, self._failures = self._failures, 0
        if failed:
            logger.warning(
                "%s: kcached at %s failed (%s); going on without the remote cache (fail open) until it answers",
                _who(),
                self._url,
                error or "no answer",
            )
        else:
            logger.warning(
                "%s: kcached at %s answers again, after %d failed call(s)", _who(), self._url, failures
            )

    def verification(self, stats: Callable[[], dict]) -> None:
        """After a miss with verification on: a WARNING the first time each
        reason (unknown-key, bad-signature...) refuses an entry. stats is
        Client.verification_stats, read only here (a call into libkcache)."""
        current = stats() or {}
        rejected = current.get("rejected") or {}
        with self._lock:
            new = sorted(r for r, n in rejected.items() if n and r not in self._rejections)
            self._rejections.update({r: n for r, n in rejected.items() if n})
        for reason in new:
            logger.warning(
                "%s: verification refused an entry (%s: %s); it is a miss. Later refusals are counted, "
                "not logged",
                _who(),
                reason,
                current.get("last_rejection", ""),
            )
