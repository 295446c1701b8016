"""Hostile evidence, built byte by byte, and a way to run code on it under hard limits.

Every builder here reproduces a finding of the security review (issue 11): a few hundred bytes
that expand to gigabytes, headers that are read whole before any limit applies, shapes no
collector writes. `run_limited` runs a child Python under RLIMIT_AS / RLIMIT_CPU so a bomb that
is not defused fails its test instead of taking the machine with it.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GiB = 1024 * 1024 * 1024


def _unicode(text: str) -> bytes:
    raw = text.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def _entry_pickle(fields: bytes) -> bytes:
    """A protocol-2 dump {"entries": [{"collective_seq_id": 1, <fields>}]}, as torch lays it."""
    entry = b"}(" + _unicode("collective_seq_id") + b"K\x01" + fields + b"u"
    return b"\x80\x02}(" + _unicode("entries") + b"](" + entry + b"eu."


def shared_reference_chain(levels: int) -> bytes:
    """Opcodes that leave one list on the stack: x0 = [0], x(i) = [x(i-1), x(i-1)], each kept in
    the memo. Its repr has 2**levels leaves; the pickle grows by 8 bytes a level."""
    out = [b"]q\x00K\x00a"]
    for level in range(1, levels + 1):
        out.append(b"0](h%ch%ceq%c" % (level - 1, level - 1, level))
    out.append(b"0h%c" % levels)
    return b"".join(out)


def shared_reference_pickle(levels: int = 30, field: str = "input_sizes") -> bytes:
    """The review's 346-byte dump: one field of one entry expands to 2**levels leaves."""
    return _entry_pickle(_unicode(field) + shared_reference_chain(levels))


def memo_index_pickle(index: int) -> bytes:
    """LONG_BINPUT asking for memo slot `index`: the C unpickler allocates index*2 slots."""
    return b"\x80\x02N" + b"r" + index.to_bytes(4, "little") + b"."


def container_flood_pickle(count: int) -> bytes:
    """`count` empty lists from one byte each (72 bytes of objects per byte of dump)."""
    return b"\x80\x02" + b"]" * count + b"."


def huge_int_pickle(digits_bytes: int = 65_536) -> bytes:
    """An entry whose profiling_name is an int too big for str() (ValueError in Python 3.11+)."""
    huge = b"\x8b" + digits_bytes.to_bytes(4, "little") + b"\x7f" * digits_bytes
    return _entry_pickle(_unicode("profiling_name") + huge)


def deep_json(depth: int, key: str | None = None) -> bytes:
    inner = "[" * depth + "]" * depth
    return (json.dumps({key: 0})[:-2] + inner + "}" if key else inner).encode()


def run_limited(
    code: str, *args: str, address_space: int = GiB, cpu_seconds: int = 30, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `python -c code args...` from the repository root under RLIMIT_AS and RLIMIT_CPU."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limits,  # the child is Python itself: no threads to race with
        check=False,
    )
