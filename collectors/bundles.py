"""Evidence bundles: a snapshot as plain files in a .tar.gz (or a directory), both ways.

Layout (docs/bundle-format.md):  manifest.json, and per node  <node>/ps.txt,
<node>/environ/<pid>, <node>/pyspy/<pid>.json|.txt, <node>/dmesg.txt, <node>/nvidia-smi.txt,
<node>/logs/<name>, <node>/flight_recorder/<name>, <node>/shell-init.txt. Every file optional.

Bundles come from outside, so reading one trusts nothing: no links, no absolute or
escaping paths, bounded sizes and counts, and nothing is written to disk. Archives are read by
`tarstream`, which checks every header's sizes (names, PAX records, members, files, the total,
the compression ratio) before it reads what they announce.
"""

from __future__ import annotations

import io
import json
import tarfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from analysis.evidence import SnapshotEvidence
from core.errors import Invalid

from . import evidence_kinds as kinds
from .artifacts import artifacts_from_evidence, evidence_from_artifacts, parse_when
from .tarstream import TarLimits, TarRefused, read_tar

BUNDLE_FORMAT = 1
# `diagnose --bundle` stays within 30 s of CPU and 1 GiB on any bundle (docs/reliability.md):
# 65,536 files is a 16,384-rank job with a log, an environment, a stack and a dump per rank.
MAX_MEMBERS = 65_536
MAX_FILE_BYTES = 64 * 1024 * 1024
# Everything is held in memory at once: a quarter of the 1 GiB `diagnose --bundle` stays within.
MAX_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_NAME_BYTES = 4096
MAX_SEGMENT_BYTES = 200
# gzip, bzip2, xz: the compressed archives a bundle may come as.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
# Characters some file systems refuse in a name (NTFS, exFAT), replaced on export.
_UNSAFE_CHARACTERS = frozenset('\\<>:"|?*')
# What the analysis reads of one artifact: twice the collector's own cap (CollectionPlan's
# artifact_cap_bytes, 2 MiB). A bigger one in a bundle is cut as the collector cuts: a log or
# dmesg keeps its end, anything else its start, and the node lists it as truncated. Degenerate
# text at this size (3-byte lines) still parses within a few hundred MB and a few seconds.
MAX_ANALYSED_BYTES = 4 * 1024 * 1024
# Lines (NUL-separated variables for environ) the analysis reads in all, bundle-wide. Past
# the budget, a log keeps its last lines and anything else its first ones, marked truncated.
# (A log line costs ~8 µs to offer to every reader: 1 M lines stay near 8 s.)
MAX_ANALYSED_LINES = 1_000_000
# Flight-recorder dumps parsed per bundle (the costliest evidence per file, ~0.2 ms each).
MAX_FR_DUMPS = 16_384


class BundleRefused(Invalid):
    """The bundle is malformed or hostile; the message says which member and why."""

    field = "bundle"  # the upload it is about, for the API's answer


@dataclass
class BundleLimits:
    max_members: int = MAX_MEMBERS
    max_file_bytes: int = MAX_FILE_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES
    max_name_bytes: int = MAX_NAME_BYTES
    max_pax_bytes: int = 64 * 1024


def write_bundle(evidence: SnapshotEvidence, manifest: dict[str, Any] | None = None) -> bytes:
    """The snapshot as a .tar.gz, in memory."""
    buffer = io.BytesIO()
    header = {
        "format": BUNDLE_FORMAT,
        "cluster": evidence.cluster,
        "world_size": evidence.expected_world_size,
        "collected_at": evidence.collected_at.isoformat() if evidence.collected_at else None,
        "nodes": {node.node: {"status": node.status} for node in evidence.nodes},
        **({"scheduler": evidence.scheduler} if evidence.scheduler else {}),
        **(manifest or {}),
    }
    folders = _node_folders([node.node for node in evidence.nodes])
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        _add(tar, "manifest.json", json.dumps(header, indent=2, sort_keys=True).encode())
        for node, folder in zip(evidence.nodes, folders, strict=True):
            members = MemberNames()
            for name, content, _truncated in artifacts_from_evidence(node):
                path = members.take(_safe_relative_path(kinds.bundle_path(name)))
                _add(tar, f"{folder}/{path}", content)
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, content: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(content)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(content))


def _safe_segment(segment: str) -> str:
    """One path segment that any `tar` unpacks on any file system as itself: no parent, root
    or separator, no control character, no space or dot at either end (which some file systems
    drop and others keep), at most 200 bytes (ext4 takes 255)."""
    cleaned = "".join(
        "_" if c in _UNSAFE_CHARACTERS or c < " " or c == "\x7f" else c for c in segment
    )
    cleaned = cleaned.strip(" ")
    if cleaned.strip(".") == "":
        return "_" * max(len(cleaned), 1)
    cleaned = cleaned.rstrip(".") or "_"
    encoded = cleaned.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_SEGMENT_BYTES:
        cleaned = encoded[:MAX_SEGMENT_BYTES].decode("utf-8", "ignore")
    return cleaned


class MemberNames:
    """Member paths under one node's folder, each unique, and never a file where another
    member needs a directory (`logs/a` and `logs/a/b`): GNU tar fails with "Cannot open: Not
    a directory" on such a pair. A clash gets `~2`, `~3`, ... on the segment that clashes."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.dirs: set[str] = set()

    def take(self, path: str) -> str:
        """`path` (already made of safe segments), or the nearest free variant of it."""
        segments = path.split("/")
        for i, segment in enumerate(segments):
            last = i == len(segments) - 1
            prefix = "/".join([*segments[:i], ""])
            n = 1
            while self._clashes(prefix + segments[i], last):
                n += 1
                stem, dot, extension = segment.rpartition(".")
                segments[i] = f"{stem}~{n}.{extension}" if dot and stem else f"{segment}~{n}"
        path = "/".join(segments)
        self.files.add(path)
        self.dirs.update("/".join(segments[:i]) for i in range(1, len(segments)))
        return path

    def _clashes(self, path: str, last: bool) -> bool:
        # A directory may hold many members; a file is one, and nothing goes under it.
        return path in self.files or (last and path in self.dirs)


def _safe_relative_path(path: str) -> str:
    """A member path under a node's folder: no `..`, no absolute part, no empty segment (log
    paths and node names come from the nodes and the admins, and are not trusted)."""
    segments = [_safe_segment(s) for s in path.split("/") if s]
    return "/".join(segments) or "_"


def _node_folders(names: list[str]) -> list[str]:
    """Each node's folder: its name as one safe segment, made unique when two clean alike."""
    folders: list[str] = []
    taken: set[str] = set()
    for name in names:
        base = _safe_segment(name.replace("/", "_").strip(".")) or "node"
        folder, n = base, 1
        while folder in taken or folder == "manifest.json":
            n += 1
            folder = f"{base}-{n}"
        taken.add(folder)
        folders.append(folder)
    return folders


def read_bundle(path: Path, limits: BundleLimits | None = None) -> SnapshotEvidence:
    """A bundle file (.tar.gz / .tgz / .tar) or a directory laid out the same way."""
    if path.is_dir():
        return _evidence_from_files(_files_from_directory(path, limits or BundleLimits()))
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise BundleRefused(f"cannot read {path.name}: {exc}") from exc
    with handle:
        return read_bundle_fileobj(handle, limits)


def read_bundle_bytes(data: bytes, limits: BundleLimits | None = None) -> SnapshotEvidence:
    return read_bundle_fileobj(io.BytesIO(data), limits)


def read_bundle_fileobj(fileobj: IO[bytes], limits: BundleLimits | None = None) -> SnapshotEvidence:
    """A bundle archive (.tar, .tar.gz, .tar.bz2, .tar.xz) from an open binary file (an upload,
    say), streamed: a header's sizes are checked before what it announces is read."""
    limits = limits or BundleLimits()
    tar_limits = TarLimits(
        max_members=limits.max_members,
        max_file_bytes=limits.max_file_bytes,
        max_total_bytes=limits.max_total_bytes,
        max_name_bytes=limits.max_name_bytes,
        max_pax_bytes=limits.max_pax_bytes,
    )
    wrong = _not_a_bundle(_peek(fileobj, 512))
    if wrong:
        raise BundleRefused(
            f"this is not an evidence bundle: {wrong}. A bundle is a .tar.gz (or .tar, "
            ".tar.bz2, .tar.xz) of one folder per node (docs/bundle-format.md), as "
            "'Download bundle' on a snapshot page or `tar czf bundle.tar.gz DIR` makes it"
        )
    files: dict[str, bytes] = {}
    try:
        for member in read_tar(fileobj, tar_limits):
            path = _checked_member_path(member.name)
            if not member.is_dir:
                files[str(path)] = member.content
    except TarRefused as exc:
        raise BundleRefused(str(exc)) from exc
    return _evidence_from_files(files)


def _peek(fileobj: IO[bytes], size: int) -> bytes | None:
    """The first `size` bytes, the stream left where it was; None when it cannot seek."""
    try:
        if not fileobj.seekable():
            return None
        at = fileobj.tell()
        head = fileobj.read(size)
        fileobj.seek(at)
    except (OSError, ValueError):
        return None
    return head


def _not_a_bundle(head: bytes | None) -> str:
    """What a file that is no archive at all looks like ("" when it may be one): said in the
    responder's words, not the tar reader's ("the archive ends inside a header")."""
    if head is None or head.startswith(_COMPRESSED_MAGIC) or head[257:262] == b"ustar":
        return ""
    if not head:
        return "the file is empty"
    if head.startswith(b"PK\x03\x04"):
        return "it is a zip archive; unzip it and pack the folder with tar"
    if head.startswith(b"%PDF"):
        return "it is a PDF document"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and text.lstrip()[:1] in ("{", "["):
        return "it is JSON text (a diagnosis or a manifest?), not an archive"
    if text and all(c.isprintable() or c in "\t\r\n" for c in text):
        return "it is plain text (a log? put it in a bundle as <node>/logs/<name>)"
    return "it is neither a tar archive nor a gzip, bzip2 or xz stream"


def _checked_member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith(("/", "\\")):
        raise BundleRefused(f"{name}: absolute paths are not allowed")
    if any(part == ".." for part in path.parts):
        raise BundleRefused(f"{name}: '..' is not allowed in a path")
    if "\\" in name or "\0" in name:
        raise BundleRefused(f"{name}: backslashes and NUL are not allowed in a path")
    parts = [p for p in path.parts if p not in ("", ".")]
    return PurePosixPath(*parts) if parts else PurePosixPath()


def _files_from_directory(root: Path, limits: BundleLimits) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for count, path in enumerate(sorted(root.rglob("*")), start=1):
        if count > limits.max_members:
            raise BundleRefused(f"more than {limits.max_members} entries")
        relative = path.relative_to(root).as_posix()
        _check_directory_name(relative, limits)
        if path.is_symlink():
            raise BundleRefused(f"{relative}: links are not allowed")
        if path.is_dir():
            continue
        if not path.is_file():
            raise BundleRefused(f"{relative}: only regular files are allowed")
        size = path.stat().st_size
        if size > limits.max_file_bytes:
            raise BundleRefused(
                f"{relative}: {size} bytes is over the {limits.max_file_bytes} limit"
            )
        total += size
        if total > limits.max_total_bytes:
            raise BundleRefused(f"more than {limits.max_total_bytes} bytes in all")
        files[relative] = path.read_bytes()
    return files


def _check_directory_name(relative: str, limits: BundleLimits) -> None:
    raw = relative.encode("utf-8", "surrogateescape")
    if len(raw) > limits.max_name_bytes:
        raise BundleRefused(f"a file name of {len(raw)} bytes is over {limits.max_name_bytes}")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        shown = raw[:80].decode("utf-8", "backslashreplace")
        raise BundleRefused(f"{shown}: the file name is not UTF-8") from None


def _evidence_from_files(files: dict[str, bytes]) -> SnapshotEvidence:
    manifest = _manifest(files.pop("manifest.json", None))
    per_node: dict[str, list[tuple[str, bytes, bool]]] = defaultdict(list)
    lines_left = [MAX_ANALYSED_LINES, MAX_FR_DUMPS]
    for name, content in files.items():
        node, _, rest = name.partition("/")
        if not rest:
            continue  # a stray top-level file: not evidence of any node
        artifact = kinds.artifact_name_of_bundle_path(rest)
        per_node[node].append((artifact, *_analysed(artifact, content, lines_left)))
    files.clear()  # the bytes now live in per_node only
    statuses = manifest.get("nodes") if isinstance(manifest.get("nodes"), dict) else {}
    nodes = []
    for node, items in sorted(per_node.items()):
        evidence = evidence_from_artifacts(node, items, status=_node_status(statuses.get(node)))
        for artifact, _content, cut in items:
            piece = kinds.artifact_piece(artifact) if cut else None
            if piece is not None:
                evidence.truncated.append(kinds.piece_name(*piece))
        nodes.append(evidence)
    world_size = manifest.get("world_size")
    cluster = manifest.get("cluster")
    return SnapshotEvidence(
        nodes=nodes,
        # A claim the analysis weighs (and disbelieves past MAX_WORLD); past 2**31 it would not
        # even fit the snapshot's integer column (10**12 was a DataError: a 500 on import).
        expected_world_size=(
            world_size
            if isinstance(world_size, int)
            and not isinstance(world_size, bool)
            and 0 < world_size < 2**31
            else None
        ),
        collected_at=parse_when(manifest.get("collected_at")),
        cluster=cluster[:200] if isinstance(cluster, str) else "",
        # Read within bounds where it is used (analysis/schedulers/attach.py).
        scheduler=manifest.get("scheduler")
        if isinstance(manifest.get("scheduler"), dict)
        else None,
    )


def _analysed(artifact: str, content: bytes, lines_left: list[int]) -> tuple[bytes, bool]:
    """The part of an artifact the analysis reads (within MAX_ANALYSED_BYTES and what is left
    of the bundle's budgets: [lines, dumps]), and whether it was cut to get it."""
    if artifact.startswith("flight_recorder/"):
        lines_left[1] -= 1  # a dump is all or nothing: its parser has its own caps
        return (content, False) if lines_left[1] >= 0 else (b"", True)
    from_end = artifact.startswith(("logs/", "dmesg.txt"))
    cut = len(content) > MAX_ANALYSED_BYTES
    if cut:
        content = content[-MAX_ANALYSED_BYTES:] if from_end else content[:MAX_ANALYSED_BYTES]
    separator = b"\0" if artifact.startswith("environ/") else b"\n"
    lines = content.count(separator)
    if lines > lines_left[0]:
        content, cut = _first_or_last_lines(content, separator, lines_left[0], from_end), True
        lines = lines_left[0]
    lines_left[0] -= lines
    return content, cut


def _first_or_last_lines(content: bytes, separator: bytes, count: int, from_end: bool) -> bytes:
    if count <= 0:
        return b""
    if from_end:
        at = len(content)
        for _ in range(count + 1):
            at = content.rfind(separator, 0, at)
            if at < 0:
                return content
        return content[at + 1 :]
    at = -1
    for _ in range(count):
        at = content.find(separator, at + 1)
        if at < 0:
            return content
    return content[: at + 1]


def _node_status(entry: object) -> str:
    """A node's status from the manifest: a string of at most 200 characters, else "ok"."""
    status = entry.get("status") if isinstance(entry, dict) else None
    return status[:200] if isinstance(status, str) and status else "ok"


def _manifest(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {}
    if len(raw) > MAX_MANIFEST_BYTES:
        raise BundleRefused("manifest.json is larger than 1 MiB")
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleRefused(f"manifest.json is not valid JSON: {exc}") from exc
    except RecursionError:
        raise BundleRefused("manifest.json is nested too deeply") from None
    if not isinstance(manifest, dict):
        raise BundleRefused("manifest.json must hold a JSON object")
    fmt = manifest.get("format", BUNDLE_FORMAT)
    if fmt != BUNDLE_FORMAT:
        raise BundleRefused(f"manifest.json: format {fmt!r} is not supported (expected 1)")
    return manifest
