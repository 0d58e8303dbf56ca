"""Dynamo's float specializations, remembered for the next process.

With dynamic shapes, Dynamo traces Python floats as symbols (zf0, zf1, ...).
When AOTAutograd's tensorify pass cannot keep one of them symbolic, Dynamo
throws the whole attempt away (TensorifyScalarRestartAnalysis) and traces the
frame again with that float specialized. It does so in every process, warm
node or fresh. GPT-2 with dynamic=True traces twice and builds one joint graph
for nothing: about 9 s of its 15 s first step on an H100.

PyTorch keeps the names to specialize in TensorifyState, for one process only.
This module records, for each compiled frame, that set as it stood once the
frame compiled. It stores the record under the run's fingerprint (as the run
manifest is stored) and puts the set back before the same frame compiles in the
next process, so Dynamo's first attempt is the one it would have ended with.

- Sound: a specialized float becomes a constant guarded by its value (Dynamo's
  guard_scalar). A recorded set, even a wrong one, changes which attempt
  Dynamo makes first and at worst costs a recompile, never a wrong result.
- Bounded: a stored record is untrusted input. It is read only if it is JSON
  in this shape, with at most _MAX_FRAMES frames of at most _MAX_NAMES
  symbolic-float names each; anything else is ignored.
- Fail open: a torch without TensorifyState, or kcached down, leaves Dynamo
  as it is.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any, Callable, Optional

from ._bundle_watch import code_key

_log = logging.getLogger("kcache")

RECORD_VERSION = 1
_MAX_FRAMES = 256
_MAX_NAMES = 256  # PyTorch keeps a process's names for its later frames too
_NAME = re.compile(r"zf[0-9]{1,7}")  # Dynamo's symbolic floats (SymT.FLOAT)
_MAX_NAME_CHARS = 512  # of a function's qualified name, of its file's name


# (qualified name, file name without its directory, first line, compile of it
# in this process): not the path, which differs between nodes' environments.
FrameKey = tuple[str, str, int, int]


def parse(raw: bytes) -> Optional[dict[FrameKey, frozenset[str]]]:
    """A stored record as {frame: names}, or None if it is not one."""
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != RECORD_VERSION:
            return None
        frames = doc["frames"]
        if not isinstance(frames, list) or len(frames) > _MAX_FRAMES:
            return None
        out: dict[FrameKey, frozenset[str]] = {}
        for qualname, filename, line, nth, names in frames:
            if not all(isinstance(t, str) and len(t) <= _MAX_NAME_CHARS for t in (qualname, filename)):
                return None
            if not (type(line) is int and type(nth) is int and line >= 0 and nth >= 0):
                return None
            if not isinstance(names, list) or len(names) > _MAX_NAMES:
                return None
            if not all(isinstance(n, str) and _NAME.fullmatch(n) for n in names):
                return None
            out[(qualname, filename, line, nth)] = frozenset(names)
        return out
    except (ValueError, KeyError, TypeError):
        return None


def render(frames: dict[FrameKey, frozenset[str]]) -> bytes:
    items = [[*frame, sorted(names)] for frame, names in list(frames.items())[:_MAX_FRAMES]]
    return json.dumps({"version": RECORD_VERSION, "frames": items}, separators=(",", ":")).encode()


class FloatSpecializations:
    """The record of one process. load() -> stored bytes or None; store(bytes)
    -> bool: the session's fail-open calls for this run's record key."""

    def __init__(self, load: Callable[[], Optional[bytes]], store: Callable[[bytes], bool], stats):
        self._load, self._store = load, store
        self._stats = stats
        self._lock = threading.Lock()
        self._recorded: dict[FrameKey, frozenset[str]] = {}
        self._compiles: dict[tuple[str, str, int], int] = {}  # frames compiled so far, per code
        self._loaded = False

    def install(self) -> Callable[[], None]:
        """Wraps Dynamo's per-frame compile; returns the undo. Raises
        AttributeError or ImportError on a torch without the parts it needs."""
        import torch._dynamo.convert_frame as convert_frame
        from torch._dynamo.symbolic_convert import TensorifyState

        if not isinstance(getattr(TensorifyState, "force_specializations", None), set):
            raise AttributeError("TensorifyState.force_specializations is not a set")
        original = convert_frame._compile
        this = self

        def _compile(code, *args, **kwargs):
            frame = this._before(code, TensorifyState.force_specializations)
            result = original(code, *args, **kwargs)
            this._after(frame, TensorifyState.force_specializations)
            return result

        convert_frame._compile = _compile

        def undo() -> None:
            if convert_frame._compile is _compile:
                convert_frame._compile = original

        return undo

    def _before(self, code: Any, specializations: set[str]) -> Optional[FrameKey]:
        try:
            qualname, line = code_key(code)
            code_id = (qualname, os.path.basename(code.co_filename), line)
            with self._lock:
                first, self._loaded = not self._loaded, True
            if first:  # at the first frame: kcached is asked once, and not before a compile
                self._read()
            with self._lock:
                nth = self._compiles.get(code_id, 0)
                self._compiles[code_id] = nth + 1
                frame = (*code_id, nth)
                seeds = self._recorded.get(frame)
            if seeds and not seeds <= specializations:
                specializations.update(seeds)
                self._stats["float_specializations_seeded"] += 1
            return frame
        except Exception as e:  # noqa: BLE001 - never in the way of a compile
            _log.debug("kcache: float specializations not seeded (%s: %s)", type(e).__name__, e)
            return None

    def _read(self) -> None:
        raw = self._load()
        if raw is None:
            return
        record = parse(raw)
        if record is None:
            self._stats["float_specializations_refused"] += 1
            return
        with self._lock:
            self._recorded = record

    def _after(self, frame: Optional[FrameKey], specializations: set[str]) -> None:
        """Stores the set once the frame compiled, if it differs from the record."""
        if frame is None:
            return
        try:
            names = frozenset(n for n in specializations if _NAME.fullmatch(n))
            if len(names) > _MAX_NAMES:
                return
            with self._lock:
                if self._recorded.get(frame, frozenset()) == names:
                    return
                if not names:
                    self._recorded.pop(frame, None)
                elif frame in self._recorded or len(self._recorded) < _MAX_FRAMES:
                    self._recorded[frame] = names
                else:
                    return
                body = render(self._recorded)
            if self._store(body):
                self._stats["float_specializations_stored"] += 1
        except Exception as e:  # noqa: BLE001 - never in the way of a compile
            _log.debug("kcache: float specializations not stored (%s: %s)", type(e).__name__, e)
