"""A tar archive from an untrusted upload, read one bounded piece at a time.

Python's `tarfile` reads a GNU long-name or PAX header's payload whole before anything can look
at it: a header declaring a 2 GiB name, compressed to 2 MB, took 4.3 GB of memory. This reader
parses the 512-byte headers itself and checks every size against `TarLimits` before it reads
(let alone allocates) what the size announces: names, PAX records, member counts, each file, the
total (every payload counts: files, directories' data, long names and PAX headers), and the
compression ratio. It yields regular files and directories; everything else
(links, devices, sparse files, volume headers) is refused, as is anything that is not a tar
archive (a bad header checksum) or that ends mid-member.

Pure: no Django.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_CHUNK = 1024 * 1024
_ASCII = bytes(range(128))


class TarRefused(ValueError):
    """The archive is malformed or hostile; the message says which member and why."""


@dataclass(frozen=True)
class TarLimits:
    max_members: int = 65_536
    max_file_bytes: int = 64 * 1024 * 1024
    max_total_bytes: int = 256 * 1024 * 1024
    # A member's path (a GNU long name or a PAX `path` included); PATH_MAX on Linux.
    max_name_bytes: int = 4096
    # One PAX extended header (its records: path, size, times, ...).
    max_pax_bytes: int = 64 * 1024
    # Unpacked bytes per compressed byte, checked once `ratio_floor` bytes are unpacked: gzip
    # at its best is ~1030:1 on zeros; logs and dumps are 5-50:1.
    max_ratio: int = 200
    ratio_floor: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class TarMember:
    name: str
    is_dir: bool
    content: bytes


class _Counted:
    """The compressed side: counts the bytes the decompressor has taken."""

    def __init__(self, raw: IO[bytes], head: bytes) -> None:
        self.raw, self.head, self.taken = raw, head, len(head)

    def read(self, size: int = -1) -> bytes:
        head = self.head
        if head and 0 <= size <= len(head):
            self.head = head[size:]
            return head[:size]
        self.head = b""
        data = self.raw.read(-1 if size < 0 else size - len(head))
        self.taken += len(data)
        return head + data

    def readable(self) -> bool:
        return True


def _open_stream(fileobj: IO[bytes]) -> tuple[IO[bytes], _Counted]:
    head = fileobj.read(6)
    counted = _Counted(fileobj, head)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=counted, mode="rb"), counted
    if head.startswith(b"BZh"):
        return bz2.BZ2File(counted), counted
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(counted), counted
    return counted, counted  # an uncompressed tar


class _Reader:
    def __init__(self, fileobj: IO[bytes], limits: TarLimits) -> None:
        self.stream, self.counted = _open_stream(fileobj)
        self.limits = limits
        self.unpacked = 0

    def read(self, size: int, what: str) -> bytes:
        """Exactly `size` bytes (callers have bounded `size`), or TarRefused."""
        parts, left = [], size
        while left:
            part = self.stream.read(min(left, _CHUNK))
            if not part:
                raise TarRefused(f"{what}: the archive ends early")
            parts.append(part)
            left -= len(part)
            self._count(len(part))
        return b"".join(parts)

    def skip(self, size: int, what: str) -> None:
        while size:
            size -= len(self.read(min(size, _CHUNK), what))

    def header(self) -> bytes | None:
        """The next 512-byte block; None at a clean end (no more bytes)."""
        block = self.stream.read(BLOCK)
        while 0 < len(block) < BLOCK:  # an upload or a pipe may answer in smaller pieces
            more = self.stream.read(BLOCK - len(block))
            if not more:
                break
            block += more
        if len(block) < BLOCK:
            if block.strip(b"\0"):
                raise TarRefused("the archive ends inside a header")
            return None
        self._count(BLOCK)
        return block

    def _count(self, size: int) -> None:
        self.unpacked += size
        limits = self.limits
        if self.unpacked > limits.ratio_floor and (
            self.unpacked > limits.max_ratio * max(self.counted.taken, 1)
        ):
            raise TarRefused(
                f"unpacks to over {limits.max_ratio} times its compressed size "
                f"({self.unpacked} bytes from {self.counted.taken}): a compression bomb"
            )


def read_tar(fileobj: IO[bytes], limits: TarLimits | None = None) -> Iterator[TarMember]:
    """The archive's regular files and directories, in order, each within the limits."""
    limits = limits or TarLimits()
    try:
        reader = _Reader(fileobj, limits)
        yield from _members(reader, limits)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:  # bad compressed data
        raise TarRefused(f"not a readable tar archive: {exc}") from exc


def _members(reader: _Reader, limits: TarLimits) -> Iterator[TarMember]:
    headers = total = 0
    pending: dict[str, bytes] = {}  # from a GNU long name or a PAX header, for the next member
    while True:
        block = reader.header()
        if block is None or block == _ZERO_BLOCK:
            if headers == 0:
                raise TarRefused("not a readable tar archive: no member in it")
            return
        headers += 1
        if headers > limits.max_members:
            raise TarRefused(f"more than {limits.max_members} entries")
        kind, name, size = _parse_header(block, headers)
        if kind in (b"L", b"x", b"g"):
            _read_extension(reader, limits, kind, size, pending)  # bounded by its own cap first
            total = _counted(total, size, limits)  # payloads count, whatever they are
            continue
        name = pending.pop("path", name)
        if "size" in pending:
            size = _pax_size(pending.pop("size"), name)
        pending.clear()
        shown = _name(name, limits)
        if kind in (b"1", b"2", b"K"):
            raise TarRefused(f"{shown}: links are not allowed")
        if size > limits.max_file_bytes:
            raise TarRefused(f"{shown}: {size} bytes is over the {limits.max_file_bytes} limit")
        if kind not in (b"0", b"\0", b"7", b"5"):
            raise TarRefused(f"{shown}: only regular files are allowed")
        total = _counted(total, size, limits)  # a directory's "content" counts too
        if kind == b"5":
            reader.skip(_padded(size), shown)
            yield TarMember(shown, True, b"")
            continue
        content = reader.read(size, shown)
        reader.skip(_padded(size) - size, shown)
        yield TarMember(shown, False, content)


def _counted(total: int, size: int, limits: TarLimits) -> int:
    total += size
    if total > limits.max_total_bytes:
        raise TarRefused(f"more than {limits.max_total_bytes} bytes once unpacked")
    return total


def _read_extension(
    reader: _Reader, limits: TarLimits, kind: bytes, size: int, pending: dict
) -> None:
    """A GNU long name (L) or a PAX header (x, or g: global, read and ignored), bounded before
    it is read."""
    cap = limits.max_name_bytes if kind == b"L" else limits.max_pax_bytes
    label = "GNU long name" if kind == b"L" else "PAX header"
    if size > cap:
        raise TarRefused(f"a {label} of {size} bytes is over the {cap} limit")
    payload = reader.read(size, label)
    reader.skip(_padded(size) - size, label)
    if kind == b"L":
        pending["path"] = payload.split(b"\0", 1)[0]
    elif kind == b"x":
        pending.update(_pax_records(payload))


def _parse_header(block: bytes, index: int) -> tuple[bytes, bytes, int]:
    stored = _number(block[148:156], "checksum", index)
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:])
    signed = unsigned - 256 * len((block[:148] + block[156:]).translate(None, _ASCII))
    if stored not in (unsigned, signed):
        raise TarRefused(f"not a readable tar archive: bad header checksum (entry {index})")
    name = block[:100].split(b"\0", 1)[0]
    if block[257:263] == b"ustar\0":  # POSIX: a prefix holds the leading directories
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    kind = block[156:157]
    size = _number(block[124:136], "size", index)
    return kind, name, size


def _number(field: bytes, what: str, index: int) -> int:
    """An octal field, or GNU's base-256 (first byte 0x80; 0xff is negative, refused)."""
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    if field[:1] == b"\xff":
        raise TarRefused(f"entry {index}: a negative {what}")
    digits = field.split(b"\0", 1)[0].strip(b" ")
    if not digits:
        return 0
    if len(digits) > 12 or not all(48 <= b <= 55 for b in digits):
        raise TarRefused(f"not a readable tar archive: entry {index} has an unreadable {what}")
    return int(digits, 8)


def _pax_records(payload: bytes) -> dict[str, bytes]:
    """`<length> <key>=<value>\\n` records; `path` and `size` are kept, the rest ignored."""
    found: dict[str, bytes] = {}
    at = 0
    while at < len(payload):
        space = payload.find(b" ", at, at + 21)
        digits = payload[at:space] if space > at else b""
        if not digits.isdigit() or not digits.isascii():
            raise TarRefused("a PAX header holds a record without a length")
        end = at + int(digits)
        if end > len(payload) or end <= space or payload[end - 1 : end] != b"\n":
            raise TarRefused("a PAX header holds a record of the wrong length")
        key, equals, value = payload[space + 1 : end - 1].partition(b"=")
        if not equals:
            raise TarRefused("a PAX header holds a record without '='")
        if key in (b"path", b"size"):
            found[key.decode()] = value
        at = end
    return found


def _pax_size(value: bytes, name: bytes) -> int:
    if not value.isdigit() or not value.isascii() or len(value) > 20:
        raise TarRefused(f"{_shown(name)}: PAX size {value[:24]!r} is not a size")
    return int(value)


def _name(raw: bytes, limits: TarLimits) -> str:
    if len(raw) > limits.max_name_bytes:
        raise TarRefused(f"a member name of {len(raw)} bytes is over {limits.max_name_bytes}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TarRefused(f"{_shown(raw)}: the member name is not UTF-8") from None


def _shown(raw: bytes) -> str:
    """A name for a message: at most 80 characters, undecodable bytes escaped."""
    text = raw[:80].decode("utf-8", "backslashreplace")
    return text + ("…" if len(raw) > 80 else "")


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK
