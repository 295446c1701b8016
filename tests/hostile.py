"""Hostile evidence, built byte by byte, and a way to run code on it under hard limits.

Every builder here reproduces a finding of the security review (issue 11): a few hundred bytes
that expand to gigabytes, headers that are read whole before any limit applies, shapes no
collector writes. `run_limited` runs a child Python under RLIMIT_AS / RLIMIT_CPU so a bomb that
is not defused fails its test instead of taking the machine with it.
"""

from __future__ import annotations

import gzip
import json
import random
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


# --- whole bundles, as files for `manage.py diagnose --bundle` ---------------------------------

SAMPLE = REPO / "tests" / "analysis" / "samples" / "outside"
PS_HEADER = b"PID PPID STAT ELAPSED COMMAND\n"


def _member_stream(members: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(tar_file(name, content) for name, content in members)


def bundle_of(members: list[tuple[bytes, bytes]], manifest: dict | None = None) -> bytes:
    """A .tar.gz bundle: manifest.json (format 1) and the given members."""
    head = [(b"manifest.json", json.dumps({"format": 1, **(manifest or {})}).encode())]
    return tar_gz(_member_stream(head + members))


def _pickles() -> dict[str, bytes]:
    fields = ("input_sizes", "profiling_name", "state", "process_group")
    return {
        **{f"fr-shared-references-{f}": shared_reference_pickle(30, f) for f in fields},
        "fr-memo-index": memo_index_pickle(2**32 - 1),
        "fr-container-flood": container_flood_pickle(16 * MiB - 16),
        "fr-huge-int": huge_int_pickle(),
        "fr-deep-json": deep_json(200_000),
    }


def _degenerate_logs() -> dict[str, list[tuple[bytes, bytes]]]:
    size = 60 * MiB
    return {
        "log-one-line-of-60-mib": [(b"gpu-0/logs/rank0.log", b"RuntimeError: " + b"a" * size)],
        "log-two-character-lines": [(b"gpu-0/logs/rank0.log", b"ab\n" * (size // 3))],
        "log-empty-lines": [(b"gpu-0/logs/rank0.log", b"\n" * size)],
        "log-non-ascii": [(b"gpu-0/logs/rank0.log", "✓\n".encode() * (size // 4))],
        "dmesg-spaces": [(b"gpu-0/dmesg.txt", b" " * size)],
        "nvidia-smi-spaces": [(b"gpu-0/nvidia-smi.txt", b"|" + b" " * size + b"|\n")],
        "environ-nuls": [(b"gpu-0/environ/7", b"\0" * size)],
        "ps-rows": [(b"gpu-0/ps.txt", PS_HEADER + b"7 1 S 5 python -u train.py\n" * (size // 28))],
        "pyspy-text-frames": [
            (
                b"gpu-0/pyspy/7.txt",
                b'Thread 7 (active): "MainThread"\n' + b"  f (a.py:1)\n" * (size // 14),
            )
        ],
        "shell-init-lines": [
            (b"gpu-0/shell-init.txt", b"/root/.bashrc:1:export NCCL_X=1\n" * (size // 34))
        ],
    }


def _malformed() -> dict[str, list[tuple[bytes, bytes]]]:
    wrong_pyspy = [
        b"[1, 2]",
        b'{"frames": 5}',
        b'[{"frames": 5}]',
        b'[{"thread_name": "MainThread", "frames": [{"name": {"a": 1}, "line": "x", '
        b'"filename": 7}]}]',
        deep_json(200_000),
    ]
    return {
        "pyspy-wrong-types": [
            (b"gpu-0/pyspy/%d.json" % (i + 1), blob) for i, blob in enumerate(wrong_pyspy)
        ],
        "node-json-deep": [(b"gpu-0/node.json", deep_json(200_000, "hostname"))],
        "environ-superscript-pid": [(b"gpu-0/environ/\xc2\xb2", b"RANK=0\0")],
        "fr-wrong-types": [
            (
                b"gpu-0/flight_recorder/trace_rank_0",
                json.dumps(
                    {
                        "entries": [
                            {"collective_seq_id": "1"},
                            {"collective_seq_id": 2, "is_p2p": 1, "p2p_seq_id": [1]},
                        ],
                        "pg_config": {"0": {"ranks": {"a": 1}}},
                        "pg_status": [1],
                        "rank": "0",
                    }
                ).encode(),
            )
        ],
    }


def hostile_bundles(root: Path) -> dict[str, Path]:
    """Every hostile bundle of the review and of this suite, written under `root`."""
    built: dict[str, bytes] = {}
    for name, blob in _pickles().items():
        built[name] = bundle_of(
            [(b"gpu-0/ps.txt", PS_HEADER), (b"gpu-0/flight_recorder/trace_rank_0", blob)]
        )
    for name, members in {**_degenerate_logs(), **_malformed()}.items():
        built[name] = bundle_of(members)
    built["tar-gnu-long-name"] = extension_header_bomb(b"L")
    built["tar-pax-header"] = extension_header_bomb(b"x")
    built["tar-zeros-1-gib"] = gz(tar_header(b"gpu-0/dmesg.txt", 1 << 30)) + repeated_gz(
        b"\0", 1 << 30
    )
    built["tar-non-utf8-name"] = tar_gz(tar_file(b"gpu-0/logs/\xff.log", b"x"))
    built["manifest-deep"] = tar_gz(tar_file(b"manifest.json", deep_json(200_000, "nodes")))
    built["manifest-world-131072"] = bundle_of(
        [(b"gpu-0/ps.txt", PS_HEADER)], {"world_size": 131_072}
    )
    built["manifest-world-10**9"] = bundle_of([(b"gpu-0/ps.txt", PS_HEADER)], {"world_size": 10**9})
    built.update(_at_the_member_limit())
    paths = {}
    for name, blob in built.items():
        path = root / f"{name}.tar.gz"
        path.write_bytes(blob)
        paths[name] = path
    return paths


def run_limited_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    address_space: int = GiB,
    cpu_seconds: int = 30,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """`python argv...` under RLIMIT_AS / RLIMIT_CPU (the done-when of issue 11: 1 GiB, 30 s)."""

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))

    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limits,  # the child is Python itself: no threads to race with
        check=False,
    )


def short_random_lines(size: int, seed: int = 0) -> bytes:
    """`size` bytes of 3-byte lines of random letters: about 2.5:1 compressed, so no ratio
    check stops them, and the most lines per byte a log reader can be given."""
    letters = bytes(97 + b % 26 for b in range(256))
    buffer = bytearray(random.Random(seed).randbytes(size).translate(letters))
    buffer[2::3] = b"\n" * len(buffer[2::3])
    return bytes(buffer)


def _at_the_member_limit(count: int = 65_530) -> dict[str, bytes]:
    """Valid bundles as large as the limits allow: 65,530 real per-rank files of the two
    costliest kinds (flight-recorder dumps, training logs; one rank each, 8 ranks a node), and 12
    logs of 4 MiB of 3-byte lines (17 M lines)."""
    rank_files = {
        "fr": ("flight_recorder/trace_rank_%d", (SAMPLE / "fr" / "trace_rank_0").read_bytes()),
        "logs": ("logs/rank%d.log", (SAMPLE / "rank0.log").read_bytes()),
    }
    built = {}
    for kind, (pattern, content) in rank_files.items():
        members = [(b"gpu-%d/" % (i // 8) + (pattern % i).encode(), content) for i in range(count)]
        built[f"members-{count}-{kind}"] = bundle_of(members)
    built["logs-12-of-4-mib-short-lines"] = bundle_of(
        [
            (b"gpu-%d/logs/rank%d.log" % (i // 8, i), short_random_lines(4 * MiB, i))
            for i in range(12)
        ]
    )
    return built
