"""A pickle read without ever executing anything from it, within a memory budget.

A flight-recorder dump from a node is untrusted input: `pickle.load` on it can run arbitrary
code. `SafeUnpickler` builds only what the pickle opcodes build natively (dict, list, tuple,
str, bytes, int, float, bool, None) and refuses any global lookup (classes, functions, reduce
calls) with a clear error; `_scan` walks the opcodes first and refuses what would build more
than any dump holds.
"""

from __future__ import annotations

import functools
import io
import pickle
import re
from typing import Any

# The collector cuts an artifact at 2 MiB; a bundle may carry a bigger dump, not an unbounded one.
MAX_DUMP_BYTES = 16 * 1024 * 1024
# What unpickling may build, estimated before anything is built (`_scan`): a dump of plain data
# weighs a few times its size; a hostile one (1-byte opcodes that each build a list) 80 times.
MAX_UNPICKLED_BYTES = 256 * 1024 * 1024
# Memo slots the C unpickler allocates up to the highest PUT index it is given (7 bytes asking
# for slot 10**8 cost 1.5 GB): indexes are sequential in every pickler, so bound them.
MAX_MEMO_INDEX = 1 << 21


class UnsafePickleError(pickle.UnpicklingError):
    """The dump asked to import something, or to build more than any dump holds."""


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(
            f"refusing to load {module}.{name}: flight-recorder dumps contain only plain "
            "containers and scalars"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a persistent reference in a flight-recorder dump")


def safe_loads(data: bytes) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise UnsafePickleError(f"dump of {len(data)} bytes is above the {MAX_DUMP_BYTES} cap")
    _scan(data)
    # A BufferedReader has `peek`, so the C unpickler reads the dump in 8 KiB chunks; on a bare
    # BytesIO it calls `read` once per opcode, which costs more than the unpickling itself.
    return SafeUnpickler(io.BufferedReader(io.BytesIO(data))).load()


# Opcodes walked by one regex: no argument, or a fixed-size one. The walk runs over a copy of
# the dump in which every byte is replaced by its opcode's class (`_CLASSES`: 0, 1, 2, 4 or 8
# bytes of argument, x for the rest); an argument's bytes are skipped by their count whatever
# they became, so the walk is the same as over the opcodes themselves, and each alternative
# starts with its own literal (the regex engine skips a failing one at a glance, where a class
# of opcodes cost it a set lookup). Possessive, so nothing is kept to backtrack into.
# Sets (EMPTY_SET, ADDITEMS, FROZENSET: 216 bytes each from one opcode) are left out: torch
# never writes them, and they are refused. `.` (STOP), `r` (LONG_BINPUT) and everything with a
# length or a line are handled by `_scan` itself.
_FIXED_OPS = {
    b"0": b"()012NRabdelostuQ]}\x81\x85\x86\x87\x88\x89\x92\x93\x94\x97\x98",
    b"1": b"Khq\x80\x82",
    b"2": b"M\x83",
    b"4": b"Jj\x84",
    b"8": b"G",
}
_CLASSES = bytes(
    next((size[0] for size, ops in _FIXED_OPS.items() if op in ops), ord("x")) for op in range(256)
)
_FIXED_RUN = re.compile(rb"(?:1.|0++|2..|4....|8........)*+", re.DOTALL)


def _set(ops: bytes) -> bytes:
    return b"[" + b"".join(re.escape(bytes([op])) for op in ops) + b"]"


@functools.cache  # compiled on the first dump (10-20 ms): most analyses read none
def _inline_run() -> re.Pattern:
    """The walk of `_FIXED_RUN` over the dump's own bytes, a payload of under 256 bytes taken in
    the same run (one alternative per length: 1-byte lengths, and 4-byte ones whose three high
    bytes are 0), and LONG_BINPUT with an index the memo may hold. A payload that runs past the
    end, or anything else, ends the run, and `_walk` handles it as before."""
    sizes = [(re.escape(bytes([size])), b".{%d}" % size if size else b"") for size in range(256)]
    short = b"(?:" + b"|".join(size + skip for size, skip in sizes) + b")"
    long = b"(?:" + b"|".join(size + rb"\x00\x00\x00" + skip for size, skip in sizes) + b")"
    memo = rb"r..[\x00-\x1f]\x00|r\x00\x00\x20\x00"  # index <= MAX_MEMO_INDEX (1 << 21)
    # The regex engine tries alternatives in turn, one led by a literal at a glance, one led by
    # a set by a lookup: torch's most frequent opcodes go first, each as its own literal
    # (BINGET; MARK, EMPTY_LIST, APPENDS; BININT1, BINPUT; BINUNICODE). Whichever alternative
    # takes an opcode takes its argument's bytes, so the order changes nothing of the walk.
    alternatives = [
        b"h.",
        rb"\(",
        rb"\]",
        b"e",
        b"K.",
        b"q.",
        b"X" + long,
        _set(_FIXED_OPS[b"0"]) + b"++",
        b"\x8c" + short,
        _set(b"UC\x8a") + short,
        _set(b"BT\x8b") + long,
        _set(b"\x80\x82") + b".",
        _set(_FIXED_OPS[b"2"]) + b"..",
        _set(_FIXED_OPS[b"4"]) + b"....",
        memo,
        b"G........",
    ]
    return re.compile(b"(?:" + b"|".join(alternatives) + b")*+", re.DOTALL)


# Opcode -> what `_scan` does with it: N > 0, skip a payload whose little-endian length takes
# N bytes; _LINE/_LINES2, skip one/two lines; _PUT, check a memo index; _STOP; _REFUSE.
_STOP, _PUT, _LINE, _LINES2, _FRAME, _REFUSE = -1, -2, -3, -4, -5, 0
_ACTIONS = [_REFUSE] * 256
for _op, _action in {
    **dict.fromkeys(b"\x8cUC\x8a", 1),
    **dict.fromkeys(b"XBT\x8b", 4),
    **dict.fromkeys(b"\x8d\x8e\x96", 8),
    **dict.fromkeys(b"ILFSVPg", _LINE),
    **dict.fromkeys(b"ci", _LINES2),
    **dict.fromkeys(b"rp", _PUT),
    ord("."): _STOP,
    0x95: _FRAME,
}.items():
    _ACTIONS[_op] = _action
# Opcode bytes that build a container from one or two bytes of dump. Counted over the whole
# dump (an overcount: payload and argument bytes that look like them count too).
_NOT_BUILDS = bytes(b for b in range(256) if b not in b"]}()\x85\x86\x87")


def _scan(data: bytes) -> None:
    """Walk the opcodes without building anything; refuse a dump that would build more than
    MAX_UNPICKLED_BYTES or ask for a memo slot past MAX_MEMO_INDEX. A dump that ends early is
    left to the unpickler, which fails on it before building past it."""
    end = len(data)
    # The weight below is at most 16 * end + 80 * builds + 80 * payloads, with builds <= end and
    # payloads <= end / 2 (an opcode and its length at least): 136 bytes a byte. A dump of up
    # to 1.97 MB can never reach the cap, so it is only walked (`_inline_run`), not counted.
    if 136 * end <= MAX_UNPICKLED_BYTES:
        _walk(data, _inline_run().match, data)
        return
    payloads, payload_bytes = _walk(data, _FIXED_RUN.match, data.translate(_CLASSES))
    builds = len(data.translate(None, _NOT_BUILDS))
    weight = 16 * (end - payload_bytes) + 80 * builds + 80 * payloads + 4 * payload_bytes
    if weight > MAX_UNPICKLED_BYTES:
        raise UnsafePickleError(
            f"refusing a dump that would build about {weight >> 20} MiB of objects from "
            f"{end} bytes (cap {MAX_UNPICKLED_BYTES >> 20} MiB)"
        )


def _walk(data: bytes, run, subject: bytes) -> tuple[int, int]:
    """The opcodes from the first, a run at a time through `run` (over `subject`: the dump, or
    its copy in opcode classes), payloads it leaves skipped by their length. Returns the
    number of payloads skipped here, and their bytes."""
    actions, from_bytes = _ACTIONS, int.from_bytes
    payload_bytes = payloads = at = 0
    end = len(data)
    while True:
        at = run(subject, at).end()
        if at >= end:
            break
        op = data[at]
        action = actions[op]
        if action > 0:  # most opcodes past a run: their length is checked inline
            if action == 1 and at + 1 < end:
                size = data[at + 1]
            else:
                size = from_bytes(data[at + 1 : at + 1 + action], "little")
            after = at + 1 + action + size
            if after > end:
                _check_length(size, end - at - 1 - action, at)
            at = after
            payloads += 1
            payload_bytes += size
        elif action == _STOP:
            break
        elif action == _FRAME:  # a frame's opcodes follow: only its length is checked
            _check_length(int.from_bytes(data[at + 1 : at + 9], "little"), end - at - 9, at)
            at += 9
        elif action in (_PUT, _LINE, _LINES2):
            at = _skip_argument(data, at, op, action)
        else:
            raise UnsafePickleError(f"opcode {op:#04x} at byte {at}: not in a flight recorder")
    return payloads, payload_bytes


def _skip_argument(data: bytes, at: int, op: int, action: int) -> int:
    """Past the argument of a line-terminated opcode or LONG_BINPUT; PUT indexes checked."""
    if op == 0x72:  # LONG_BINPUT
        _check_memo_index(int.from_bytes(data[at + 1 : at + 5], "little"))
        return at + 5
    start = at = at + 1
    for _ in range(2 if action == _LINES2 else 1):
        newline = data.find(b"\n", at)
        if newline < 0:
            return len(data)
        at = newline + 1
    if op == 0x70:  # PUT: the index in decimal
        text = data[start : at - 1]
        if len(text) > 10 or not text.isdigit():
            raise UnsafePickleError(f"PUT index {text[:12]!r} is not a memo index")
        _check_memo_index(int(text))
    return at


def _check_length(size: int, left: int, at: int) -> None:
    """The unpickler allocates what a length announces before it reads (BYTEARRAY8 of 2**63:
    a MemoryError, and CPython's own "deallocated bytearray" error; of 1 GiB: 1 GiB)."""
    if size > left:
        raise UnsafePickleError(
            f"opcode at byte {at} announces {size} bytes; {max(left, 0)} are left in the dump"
        )


def _check_memo_index(index: int) -> None:
    if index > MAX_MEMO_INDEX:
        raise UnsafePickleError(
            f"refusing memo index {index}: dumps number their objects from 0 (cap {MAX_MEMO_INDEX})"
        )
