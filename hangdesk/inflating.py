"""One gzipped frame inflated as its bytes arrive, resumed where an earlier frame's bytes were
the same: zlib's state after the same compressed bytes is the same state, so a copy of the
earlier frame's inflater as it stood there gives the very output inflating from the start
would (its running CRC included).

Why: every rank's flight-recorder dump of a job opens with the default group's member list,
the whole world (215 KB a dump at 32,000 ranks, 663 KB at 96,000), and `gzip -1 -n` on every
node turns the same opening into the same compressed bytes. Inflating it on each of a node's
eight dumps made a node's cost grow with the job; resumed, only what follows the shared part
(from the last saved state before it: at most `STEP` compressed bytes more) is inflated.

Bounded as a plain inflating is: the output stops one byte past the reader's cap, reused
output counts as inflated output; a frame saves at most `MAX_STATES` states (~40 KB each);
the frames remembered hold at most `REMEMBERED_BYTES` in all, whatever the nodes send. Only
whole, checked members are remembered; a frame is compared byte for byte, never trusted by a
digest, so a node's output depends on its own bytes only.

Pure: no Django.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

KiB = 1024
STEP = 16 * KiB  # compressed bytes between two saved states
MAX_STATES = 32  # a frame's first 1 MiB compressed (a 96,000-rank list takes ~210 KB)
KEY = 64  # compressed bytes that choose the earlier frame to compare with
REMEMBERED_BYTES = 48 * 1024 * KiB
STATE_BYTES = 48 * KiB  # what one saved state is counted as (zlib's window is 32 KiB)


@dataclass(frozen=True, slots=True)
class State:
    read: int  # compressed bytes consumed
    inflater: Any  # zlib's Decompress after them; copied before use, never fed itself
    out: int  # bytes of output it had given
    adler: int  # adler32 of those bytes


@dataclass(frozen=True, slots=True)
class Known:
    """A whole member inflated before: its bytes, its output, its saved states."""

    member: bytes
    body: bytes
    states: tuple[State, ...]

    @property
    def weight(self) -> int:
        return len(self.member) + len(self.body) + STATE_BYTES * len(self.states)


class Remembered:
    """The members inflated lately, by their first KEY compressed bytes (newest kept), in a
    budget of bytes; shared by the threads of a process."""

    def __init__(self, budget: int = REMEMBERED_BYTES) -> None:
        self.budget = budget
        self._known: OrderedDict[bytes, Known] = OrderedDict()
        self._weight = 0
        self._lock = threading.Lock()

    def get(self, key: bytes) -> Known | None:
        return self._known.get(key)

    def put(self, key: bytes, known: Known) -> None:
        if known.weight > self.budget // 4:
            return
        with self._lock:
            old = self._known.pop(key, None)
            if old is not None:
                self._weight -= old.weight
            self._known[key] = known
            self._weight += known.weight
            while self._weight > self.budget:
                _, dropped = self._known.popitem(last=False)
                self._weight -= dropped.weight

    def clear(self) -> None:
        with self._lock:
            self._known.clear()
            self._weight = 0


REMEMBERED = Remembered()


class MemberInflater:
    """A gzip member's output, at most `cap` bytes of it (a frame past that is cut: the rest
    of its bytes are not inflated). `feed` and `finish` return the output bytes they added,
    reused ones included, for the reader's budget."""

    def __init__(self, cap: int, remembered: Remembered = REMEMBERED) -> None:
        self.cap = cap
        self.remembered = remembered
        self.out: list = []  # output pieces (the first may be an earlier frame's, a view)
        self.size = 0
        self.cut = False
        self.error: str | None = None
        self.adler = 1  # adler32 of the output
        self._inflater: Any = None  # None until started (from the first byte or a state)
        self._states: list[State] = []
        self._fed = 0  # compressed bytes given to the inflater
        self._held: list = []  # compressed bytes received and not yet given (while compared)
        self._received = 0
        self._known: Known | None = None  # the earlier member compared with
        self._same = 0  # compressed bytes known the same as its
        self._deciding = True  # fewer than KEY bytes received: not compared yet

    def feed(self, piece: memoryview | bytes) -> int:
        if self.cut or self.error is not None:
            return 0
        if self._inflater is not None:
            return self._inflate(piece)
        self._held.append(piece)
        start, self._received = self._received, self._received + len(piece)
        if self._deciding:
            if self._received < KEY:
                return 0
            self._deciding = False
            held = b"".join(self._held)
            self._held = [held]
            self._known = self.remembered.get(held[:KEY])
            if self._known is None:
                return self._resume()
            start, piece = 0, held
        return self._compare(start, piece)

    def finish(self) -> int:
        """The member's bytes are all in: inflate what is held."""
        if self._inflater is None and not self.cut and self.error is None:
            return self._resume()
        return 0

    @property
    def whole(self) -> bool:
        """The member ended exactly where its bytes did."""
        inflater = self._inflater
        return inflater is not None and inflater.eof and not inflater.unused_data

    def body(self) -> bytes:
        return b"".join(self.out)[: self.cap - 1] if self.cut else b"".join(self.out)

    def remember(self, member: bytes, body: bytes) -> None:
        """Keep a whole member (checked by the caller) for the frames to come."""
        if self._states and len(member) >= KEY and not self.cut:
            self.remembered.put(member[:KEY], Known(member, body, tuple(self._states)))

    # -- inside -------------------------------------------------------------------------------

    def _compare(self, start: int, piece: memoryview | bytes) -> int:
        """Still the same as the earlier member? Held while it is; else resumed."""
        known = self._known
        assert known is not None
        if known.member.startswith(piece, start):
            self._same = start + len(piece)
            return 0
        # Where they part within this piece: as far as a saved state can tell.
        for state in known.states:
            if start < state.read <= start + len(piece):
                if not known.member.startswith(piece[: state.read - start], start):
                    break
                self._same = state.read
        return self._resume()

    def _resume(self) -> int:
        """Start inflating: from the last saved state within what is the same, else from the
        first byte; then give it what is held."""
        before, known, state = self.size, self._known, None
        for saved in known.states if known is not None else ():
            if saved.read <= self._same and saved.out < self.cap:
                state = saved
        if known is None or state is None:
            self._inflater = zlib.decompressobj(wbits=31)
        else:
            self._inflater = state.inflater.copy()
            self._states = [s for s in known.states if s.read <= state.read]
            self._fed, self.size, self.adler = state.read, state.out, state.adler
            self.out.append(memoryview(known.body)[: state.out])
        held = b"".join(self._held)
        self._held, self._known = [], None
        self._inflate(memoryview(held)[self._fed :])
        return self.size - before

    def _inflate(self, data: memoryview | bytes) -> int:
        """Inflate in steps that end on STEP boundaries, saving the state at each (the first
        MAX_STATES of them), until the output passes the cap."""
        before = self.size
        data = memoryview(data)
        while data and not self.cut:
            take = STEP - self._fed % STEP
            chunk, data = data[:take], data[take:]
            try:
                out = self._inflater.decompress(chunk, self.cap - self.size)
            except zlib.error as exc:
                self.error = str(exc)
                break
            self._fed += len(chunk)
            self.size += len(out)
            self.out.append(out)
            if self.size >= self.cap:
                self.cut = True  # the rest is read and dropped
                break
            self.adler = zlib.adler32(out, self.adler)
            inflater = self._inflater
            if (
                self._fed % STEP == 0
                and len(self._states) < MAX_STATES
                and not inflater.eof
                and not inflater.unconsumed_tail
            ):
                self._states.append(State(self._fed, inflater.copy(), self.size, self.adler))
        return self.size - before
