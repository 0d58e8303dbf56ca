"""Dynamo's float specializations, remembered for the next process.

With dynamic shapes, Dynamo traces Python floats as symbols (zf0, zf1, ...).
When AOTAutograd's tensorify pass cannot keep one of them symbolic, Dynamo
throws the whole attempt away (TensorifyScalarRestartAnalysis) and traces the
frame again with that float specialized. It does so in every process, warm
node or fresh. GPT-2 with dynamic=True traces twice and builds one joint graph
for nothing: about 9 s of its 15 s first step on an H100.

PyTorch keeps the names to specialize in TensorifyState, for one process only.
This module records, for each function Dynamo compiles, the names its first
compile needed: those PyTorch learned by restarting, and those it found
already set and used. It stores the record under the run's fingerprint (as the
run manifest is stored) and adds the names back for the function's first
compile in the next process, so Dynamo's first attempt is the one it would
have ended with.

- Sound: a specialized float becomes a constant guarded by its value (Dynamo's
  guard_scalar). A wrong record makes Dynamo guard a float it could have kept
  symbolic; that never gives a wrong result, but the function recompiles when
  that float changes. So the names given to a function are in TensorifyState
  only during that function's first compile: one recompile at most, which
  runs as PyTorch alone would. A function that recompiles after being given
  names is then recorded with only the names PyTorch itself learned or found
  set for it (in any of its compiles), which drops a stale name from the record.
- Bounded: a stored record is untrusted input. It is read only if it is at most
  _MAX_RECORD_BYTES of JSON in this shape, with at most _MAX_FRAMES functions
  of at most _MAX_NAMES symbolic-float names each, and names of functions and
  files of at most _MAX_NAME_BYTES as JSON; anything else is ignored. The same
  bounds hold what this module writes, so every record it renders parses.
- Out of the way: kcached is asked once, at the first compile, and written to
  from a background thread (and at exit), never while Dynamo compiles.
- Not for every function: one whose name is too long to store gets none.
- Fail open: a torch without TensorifyState, or kcached down, leaves Dynamo
  as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import threading
from typing import Any, Callable, Iterator, Optional

from ._bundle_watch import code_key

_log = logging.getLogger("kcache")

RECORD_VERSION = 2
_MAX_FRAMES = 256
_MAX_NAMES = 256
_MAX_NAME_BYTES = 512  # a function's qualified name, its file's name: as JSON, quotes and escapes included
# Above the largest record render() writes: 256 frames of two names, a line
# and 256 names of at most 12 bytes each (test_the_largest_record_parses).
_MAX_RECORD_BYTES = 2 << 20
_NAME = re.compile(r"zf[0-9]{1,7}")  # Dynamo's symbolic floats (SymT.FLOAT)
_MAX_LINE = 2**31 - 1  # co_firstlineno is a C int

# (qualified name, file name without its directory, first line): not the
# path, which differs between nodes' environments. Two functions that share
# a key share names, which costs at most what a wrong record costs.
CodeId = tuple[str, str, int]
Record = dict[CodeId, frozenset[str]]


def _fits(text: str) -> bool:
    """text as render() writes it is at most _MAX_NAME_BYTES (a name that
    cannot be written, a lone surrogate of a file name, does not fit)."""
    try:
        return len(json.dumps(text, ensure_ascii=False).encode()) <= _MAX_NAME_BYTES
    except (UnicodeEncodeError, ValueError):
        return False


def _small_int(digits: str) -> int:
    """JSON integers as a record has them (its version, lines): a long one is
    refused before Python converts it (quadratic in its digits)."""
    if len(digits) > 10:
        raise ValueError("an integer longer than a record holds")
    return int(digits)


def parse(raw: bytes) -> Optional[Record]:
    """A stored record, or None if it is not one."""
    if len(raw) > _MAX_RECORD_BYTES:
        return None
    try:
        doc = json.loads(raw, parse_int=_small_int)
        if not isinstance(doc, dict) or type(doc.get("version")) is not int or doc["version"] != RECORD_VERSION:
            return None
        frames = doc["frames"]
        if not isinstance(frames, list) or len(frames) > _MAX_FRAMES:
            return None
        out: Record = {}
        for qualname, filename, line, names in frames:
            if not all(isinstance(t, str) and _fits(t) for t in (qualname, filename)):
                return None
            if not (type(line) is int and 0 <= line <= _MAX_LINE):
                return None
            if not isinstance(names, list) or len(names) > _MAX_NAMES:
                return None
            if not all(isinstance(n, str) and _NAME.fullmatch(n) for n in names):
                return None
            out[(qualname, filename, line)] = frozenset(names)
        return out
    except Exception:  # noqa: BLE001 - any malformed value (deep nesting included) is refused
        return None


def render(record: Record) -> bytes:
    """The record as stored: within parse()'s bounds for any record whose
    names fit (_fits) and hold at most _MAX_NAMES names each."""
    items = [[*code, sorted(names)] for code, names in list(record.items())[:_MAX_FRAMES]]
    doc = {"version": RECORD_VERSION, "frames": items}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


class _Compile:
    """One compile of a function, while it runs."""

    def __init__(self, code: CodeId, first: bool, given: frozenset[str], lent: frozenset[str]):
        self.code = code
        self.first = first  # the function's first compile (Dynamo has no cache entry for it)
        self.given = given  # names this module added for it
        # Names this module gave the compiles this one runs inside (Dynamo's
        # compile lock is reentrant): in the set now, but not this function's.
        self.lent = lent
        self.used: set[str] = set()  # names Dynamo asked about and found set
        self.learned: set[str] = set()  # names PyTorch added itself (its restarts)


class FloatSpecializations:
    """The record of one process. load() -> stored bytes or None; store(bytes)
    -> bool: the session's fail-open calls for this run's record key."""

    def __init__(self, load: Callable[[], Optional[bytes]], store: Callable[[bytes], bool], stats):
        self._load, self._store = load, store
        self._stats = stats
        self._lock = threading.Lock()
        self._recorded: Record = {}
        self._loaded = False
        # The innermost compile running, per thread: Dynamo's compiles hold
        # its compile lock, but export and fullgraph capture trace without it.
        self._running = threading.local()
        # Touched only inside Dynamo's compiles:
        self._given_to: set[CodeId] = set()  # functions given names in this process
        # Names PyTorch itself learned or found set compiling a function (never one this module gave).
        self._own_for: dict[CodeId, set[str]] = {}
        self._pending: Optional[bytes] = None  # a record to write
        self._writing = False
        self._idle = threading.Event()  # no writer in flight
        self._idle.set()

    def install(self) -> Callable[[], None]:
        """Wraps Dynamo's per-frame compile and TensorifyState's lookup;
        returns the undo. Raises AttributeError or ImportError on a torch
        without the parts it needs."""
        import inspect

        import torch._dynamo.convert_frame as convert_frame
        from torch._dynamo.symbolic_convert import TensorifyState

        specializations = getattr(TensorifyState, "force_specializations", None)
        should_specialize = TensorifyState.__dict__.get("should_specialize")
        specialize = TensorifyState.__dict__.get("specialize")
        clear = TensorifyState.__dict__.get("clear")
        if not isinstance(specializations, set) or not all(
            isinstance(m, classmethod) for m in (should_specialize, specialize, clear)
        ):
            raise AttributeError("TensorifyState is not the one kcache knows (force_specializations, its methods)")
        original = convert_frame._compile
        signature = inspect.signature(original)
        if "cache_entry" not in signature.parameters:
            raise AttributeError("Dynamo's _compile takes no cache_entry")
        this = self

        def _compile(code, *args, **kwargs):
            try:
                first = signature.bind(code, *args, **kwargs).arguments.get("cache_entry") is None
            except TypeError:  # a call _compile refuses too; give no names
                first = False
            with this.compiling(code, first, TensorifyState.force_specializations):
                return original(code, *args, **kwargs)

        def asked(cls, index):
            found = should_specialize.__func__(cls, index)
            current = this._current
            if found and current is not None:
                current.used.add(index)
            return found

        def learn(cls, index):
            current = this._current
            if current is not None:
                current.learned.add(index)
            return specialize.__func__(cls, index)

        def cleared(cls):
            # Dynamo clears the set when it restarts a compile for another
            # reason (a graph break found while tracing): the names given for
            # this frame, and for those it runs inside, still hold, as PyTorch
            # would learn them again.
            result = clear.__func__(cls)
            current = this._current
            if current is not None:
                TensorifyState.force_specializations.update(current.given | current.lent)
            return result

        ours_ask, ours_learn, ours_clear = classmethod(asked), classmethod(learn), classmethod(cleared)
        TensorifyState.should_specialize = ours_ask
        TensorifyState.specialize = ours_learn
        TensorifyState.clear = ours_clear
        convert_frame._compile = _compile
        atexit.register(self.flush)

        def undo() -> None:
            atexit.unregister(self.flush)
            if convert_frame._compile is _compile:
                convert_frame._compile = original
            if TensorifyState.__dict__.get("should_specialize") is ours_ask:
                TensorifyState.should_specialize = should_specialize
            if TensorifyState.__dict__.get("specialize") is ours_learn:
                TensorifyState.specialize = specialize
            if TensorifyState.__dict__.get("clear") is ours_clear:
                TensorifyState.clear = clear
            self.flush()

        return undo

    # ------------------------------------------------------------ compiles

    @property
    def _current(self) -> Optional[_Compile]:
        return getattr(self._running, "compile", None)

    @contextlib.contextmanager
    def compiling(self, code: Any, first: bool, specializations: set[str]) -> Iterator[Optional[_Compile]]:
        """One compile of code, around Dynamo's: names given before, taken
        back and recorded after (recorded only if it returns)."""
        outer = self._current
        started = self._before(code, first, specializations, outer)
        self._running.compile = started
        compiled = False
        try:
            yield started
            compiled = True
        finally:
            self._running.compile = outer
            self._done(started, specializations, compiled)

    def _before(
        self, code: Any, first: bool, specializations: set[str], outer: Optional[_Compile]
    ) -> Optional[_Compile]:
        try:
            qualname, line = code_key(code)
            code_id = (qualname, os.path.basename(code.co_filename), line)
            if not all(_fits(t) for t in code_id[:2]):
                return None  # a name a record cannot hold
            with self._lock:
                first_compile_here, self._loaded = not self._loaded, True
            if first_compile_here:
                self._read()
            given: frozenset[str] = frozenset()
            if first:
                with self._lock:
                    names = self._recorded.get(code_id, frozenset())
                given = frozenset(names - specializations)
            lent = (outer.given | outer.lent) if outer is not None else frozenset()
            started = _Compile(code_id, first, given, lent)
            if given:
                self._given_to.add(code_id)
                self._stats["float_specializations_seeded"] += 1
                specializations.update(given)  # last: from here on _done takes them back
            return started
        except Exception as e:  # noqa: BLE001 - never in the way of a compile
            _log.debug("kcache: float specializations not seeded (%s: %s)", type(e).__name__, e)
            return None

    def _done(self, started: Optional[_Compile], specializations: set[str], compiled: bool) -> None:
        """Takes the given names back (a later compile runs as PyTorch alone
        would) and, for a compile that succeeded, records what it needed."""
        if started is None:
            return
        try:
            # A given name PyTorch learned itself (it cleared the set under a
            # restart kcache did not follow) is its own now, and stays.
            taken_back = started.given - started.learned
            specializations.difference_update(taken_back)
            learned = {n for n in started.learned if _NAME.fullmatch(n)}
            # Found set, less what an outer compile was given: that is the outer function's.
            used = {n for n in started.used if _NAME.fullmatch(n)} - (started.lent - started.learned)
            # PyTorch's own: what it learned, and what it found set that was not given
            # (another function's name PyTorch learned first is this one's too).
            self._own_for.setdefault(started.code, set()).update(learned | (used - taken_back))
            if not compiled:
                return
            if started.first:
                # What PyTorch would have had to know: what it learned, and what it used.
                self._record(started.code, frozenset(learned | used))
            elif started.code in self._given_to:
                # A recompile after names were given, perhaps because of one of them:
                # keep only the names PyTorch itself needed for the function.
                if self._record(started.code, frozenset(self._own_for[started.code])):
                    self._stats["float_specializations_corrected"] += 1
            # else PyTorch's own recompile: the first compile's record stands
        except Exception as e:  # noqa: BLE001 - never in the way of a compile
            _log.debug("kcache: float specializations not recorded (%s: %s)", type(e).__name__, e)

    def _record(self, code: CodeId, needed: frozenset[str]) -> bool:
        """needed becomes the function's entry; whether the record changed."""
        if len(needed) > _MAX_NAMES:
            needed = frozenset()  # more than a record holds: the function gets none, not a stale entry
        with self._lock:
            if self._recorded.get(code, frozenset()) == needed:
                return False
            if not needed:
                del self._recorded[code]
            elif code in self._recorded or len(self._recorded) < _MAX_FRAMES:
                self._recorded[code] = needed
            else:
                # Full: a function this process never compiled makes way (one
                # from before an edit moved its lines, say), else this one waits.
                stale = next((c for c in self._recorded if c not in self._own_for), None)
                if stale is None:
                    return False
                del self._recorded[stale]
                self._recorded[code] = needed
        self._schedule_store()
        return True

    # ------------------------------------------------------------ kcached

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

    def _schedule_store(self) -> None:
        """The record as it is now, written by a background thread (one at a time)."""
        with self._lock:
            self._pending = render(self._recorded)
            if self._writing:
                return
            self._writing = True
            self._idle.clear()
        try:
            threading.Thread(target=self._write_pending, name="kcache-floats", daemon=True).start()
        except RuntimeError:  # no thread now (interpreter shutting down): flush() writes it
            with self._lock:
                self._writing = False
                self._idle.set()

    def _write_pending(self) -> None:
        while True:
            with self._lock:
                body, self._pending = self._pending, None
                if body is None:
                    self._writing = False
                    self._idle.set()
                    return
            self._put(body)

    def flush(self, wait_s: float = 5.0) -> None:
        """Writes a record still waiting and lets a writer in flight finish
        (at exit, where daemon threads stop mid-request), at most wait_s."""
        with self._lock:
            write_here = not self._writing and self._pending is not None  # else the writer takes the newest itself
            if write_here:
                self._writing = True
                self._idle.clear()
        if write_here:
            self._write_pending()
        self._idle.wait(wait_s)

    def _put(self, body: bytes) -> None:
        try:
            if self._store(body):
                self._stats["float_specializations_stored"] += 1
        except Exception as e:  # noqa: BLE001 - a record not written is a restart next time
            _log.debug("kcache: float specializations not stored (%s: %s)", type(e).__name__, e)
