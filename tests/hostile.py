"""Hostile evidence, built byte by byte, and a way to run code on it under hard limits.

Every builder here reproduces a finding of the security review (issue 11): a few hundred bytes
that expand to gigabytes, headers that are read whole before any limit applies, shapes no
collector writes. `run_limited` runs a child Python under RLIMIT_AS / RLIMIT_CPU so a bomb that
is not defused fails its test instead of taking the machine with it.
"""

from __future__ import annotations

import gzip
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


# --- tar archives ---------------------------------------------------------------------------

MiB = 1024 * 1024


def tar_header(
    name: bytes, size: int, kind: bytes = b"0", *, size_field: bytes | None = None
) -> bytes:
    """One ustar header block, checksum included; `size_field` overrides the 12-byte size."""
    block = bytearray(512)
    block[0 : len(name[:100])] = name[:100]
    block[100:108] = b"0000644\0"
    block[108:124] = b"0000000\0" * 2
    block[124:136] = size_field if size_field is not None else b"%011o\0" % size
    block[136:148] = b"00000000000\0"
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[257:265] = b"ustar\x0000"
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def tar_file(name: bytes, content: bytes) -> bytes:
    return tar_header(name, len(content)) + content + bytes(-len(content) % 512)


def tar_end() -> bytes:
    return bytes(1024)


def gz(*parts: bytes) -> bytes:
    """Each part its own gzip member: the stream is their concatenation once unpacked."""
    return b"".join(gzip.compress(part, 6) for part in parts)


def repeated_gz(byte: bytes, size: int) -> bytes:
    """`size` bytes of `byte` (a multiple of 1 MiB), compressed ~1000:1 without ever being
    built: one compressed MiB, repeated."""
    one = gzip.compress(byte * MiB, 9)
    return one * (size // MiB)


def extension_header_bomb(kind: bytes, size: int = 1536 * MiB) -> bytes:
    """A GNU long name (L) or PAX header (x) declaring `size` bytes, all present: the review's
    "2 MB archive -> 4.3 GB resident". Compressed it is ~1.5 MB."""
    name = b"././@LongLink" if kind == b"L" else b"PaxHeader/x"
    return b"".join(
        [
            gz(tar_header(name, size, kind)),
            repeated_gz(b"a" if kind == b"L" else b"9", size),
            gz(tar_file(b"gpu-0/ps.txt", b"PID PPID STAT ELAPSED COMMAND\n") + tar_end()),
        ]
    )


def tar_gz(*members: bytes) -> bytes:
    return gzip.compress(b"".join(members) + tar_end())
