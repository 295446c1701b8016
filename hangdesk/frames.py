"""The probe's script and its output: one constant shell script (probe.sh, shipped with this
package) with the plan's values shell-quoted in front of it and the probe library
(probelib.sh) between them, and the incremental reader of the frames it prints. Every framed
script the console sends (the watch's, the scheduler reads) is rendered the same way
(`render_script`). The console's SSH visit (collectors/remote.py) and `hangdesk collect` run the
very same script and read it with the very same reader.

Wire format (written by probe.sh): a line `HDPROBE1 <nonce>` (anything before it, e.g. a
chatty ~/.bashrc, is ignored), then frames `HD1 <key> <size>\\n` + <size> raw bytes, and
finally `HD1 end 0`. Binary and non-UTF-8 content passes untouched. Frame keys are read
through the evidence-kind table (evidence_kinds.py).

Pure: no Django, no paramiko.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

from analysis.evidence import NodeEvidence, stopped_short

from . import evidence_kinds as kinds
from .evidence_kinds import as_text
from .inflating import MemberInflater
from .plan import CollectionPlan, KiB

PROBE_PATH = Path(__file__).with_name("probe.sh")
# What every framed script shares (the frames, the temp dir, the files a glob names).
LIBRARY_PATH = Path(__file__).with_name("probelib.sh")


# --- the probe script --------------------------------------------------------------------


def render_script(script: Path, settings: dict[str, str]) -> bytes:
    """The full text for `sh -s`: each setting as a shell-quoted assignment (the script uses
    every value as data, never evals it), then the probe library, then the constant script."""
    preamble = "".join(f"{name}={shlex.quote(value)}\n" for name, value in settings.items())
    return preamble.encode() + LIBRARY_PATH.read_bytes() + script.read_bytes()


def render_probe(
    plan: CollectionPlan, *, nonce: str = "standalone", skip_pid: int = 0, packed: bool = False
) -> bytes:
    """The full script for `sh -s`: shell-quoted settings, then the constant probe.
    `skip_pid`: a process of the caller's own that the pattern may match but is no training
    process (`hangdesk collect` itself). `packed`: the bigger frames gzipped on the node, when
    it has gzip (FrameReader inflates them, bounded, and keeps them as `packed`).

    Also usable with plain OpenSSH: `ssh node 'sh -s' < script` (see bench/).
    """
    plan.validate()
    settings = {
        "HD_PATTERN": plan.process_pattern,
        "HD_LOG_GLOBS": "\n".join(plan.log_globs),
        "HD_FR_GLOBS": "\n".join(plan.flight_recorder_globs),
        "HD_PYSPY": plan.pyspy_command,
        "HD_NCCLRAS": plan.ncclras_command,
        "HD_TAIL_BYTES": str(int(plan.tail_bytes)),
        "HD_CAP_BYTES": str(int(plan.artifact_cap_bytes)),
        "HD_CMD_TIMEOUT": str(max(1, math.ceil(plan.command_timeout_s))),
        "HD_MAX_PROCS": str(int(plan.max_processes)),
        "HD_MAX_FILES": str(int(plan.max_files)),
        # The window fits in one command's time limit, with a second for py-spy to start.
        "HD_SAMPLE_S": str(
            max(0, min(int(plan.sample_seconds), math.ceil(plan.command_timeout_s) - 1))
        ),
        "HD_SAMPLE_RATE": str(int(plan.sample_rate)),
        "HD_NONCE": nonce,
        "HD_SKIP_PID": str(int(skip_pid)) if skip_pid > 0 else "",
        "HD_SELECT": "pattern" if plan.pids is None else "pids",
        "HD_PIDS": " ".join(str(int(pid)) for pid in plan.pids or ()),
        "HD_GPU_MS": str(int(plan.gpu_sample_ms)),
        "HD_GPU_WINDOW": str(int(plan.gpu_window_s)),
        "HD_ZIP": "gzip" if packed else "",
    }
    return render_script(PROBE_PATH, settings)


# --- reading the framed output -----------------------------------------------------------

_HEADER = re.compile(rb"HD1 ([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*) (\d{1,12})(?: gz (\d{1,12}))?")
_MAX_HEADER = 200
_MAX_NOISE = 16 * KiB
# A gzip member's header as `gzip -n` writes it (deflate, no flags: no name, time or extra).
_GZIP_PLAIN_HEADER = b"\x1f\x8b\x08\x00"
_GZIP_HEADER_SIZE, _GZIP_TRAILER_SIZE = 10, 8


class Packed:
    """The frames a node sent compressed, as zlib streams, found by their content: stored as
    they came instead of compressed again (each one inflated and checked whole first)."""

    def __init__(self) -> None:
        self._by_size: dict[int, list[tuple[bytes, bytes]]] = {}

    def add(self, content: bytes, stream: bytes) -> None:
        self._by_size.setdefault(len(content), []).append((content, stream))

    def find(self, content: bytes) -> bytes | None:
        alike = self._by_size.get(len(content), ())
        for known, stream in alike:  # the frame's own body, as the evidence holds it
            if known is content:
                return stream
        for known, stream in alike:  # a node's dumps are often of one size, and alike for long
            if known == content:
                return stream
        return None


def _zlib_stream(member: bytes, adler: int) -> bytes | None:
    """A whole gzip member as a zlib stream of the same content (the same deflate data, zlib's
    header, `adler` the content's checksum): None for a member with header fields `gzip -n`
    does not write."""
    if not member.startswith(_GZIP_PLAIN_HEADER):
        return None
    deflate = memoryview(member)[_GZIP_HEADER_SIZE:-_GZIP_TRAILER_SIZE]
    return b"".join((b"\x78\x01", deflate, adler.to_bytes(4, "big")))


def frame_cap_of(plan: CollectionPlan) -> int:
    """The most a frame may hold: the plan's bigger cap, and room for the probe's marks."""
    return max(plan.tail_bytes, plan.artifact_cap_bytes) + 64 * KiB


class FrameReader:
    """Incremental parser of the probe's frames, bounded per frame and in total: the bytes
    read, and the bytes frames hold once inflated (a compressed frame is inflated at most to
    the frame cap, so no frame, however it was packed, takes more)."""

    def __init__(self, nonce: str, *, frame_cap: int, total_cap: int) -> None:
        self.marker = f"HDPROBE1 {nonce}\n".encode()
        self.frame_cap = frame_cap
        self.total_cap = total_cap
        self.frames: dict[str, bytes] = {}
        self.cut: set[str] = set()  # keys cut locally at frame_cap
        self.packed = Packed()
        self.noise = bytearray()  # bytes before the start marker (e.g. a chatty .bashrc)
        self.total = 0  # bytes read
        self.unpacked = 0  # bytes the frames hold (inflated)
        self.started = False
        self.ended = False
        self.error: str | None = None
        self._buf = bytearray()  # the start marker's search, or a header split between reads
        self._key: str | None = None
        self._size = 0  # the frame's size as its header says
        self._left = 0  # bytes of the frame's body still to read
        self._parts: list = []  # the body as read (pieces of the reads, joined at the end)
        self._kept = 0
        self._packed = False  # the frame came compressed
        self._inflater: MemberInflater | None = None  # ... and is being inflated

    @property
    def over_cap(self) -> bool:
        return self.total > self.total_cap or self.unpacked > self.total_cap

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.ended or self.error is not None:
            return
        at = 0
        if not self.started:
            found = data.find(self.marker) if not self._buf else -1
            if found < 0:
                self._buf += data
                if not self._seek_start():
                    return
                data, self._buf = bytes(self._buf), bytearray()
            else:  # the start marker within this read: its frames read from it, not copied
                self._begin(data, found)
                at = found + len(self.marker)
        view = memoryview(data)
        while at < len(data) and self.error is None and not self.ended and not self.over_cap:
            at = self._read_header(data, at) if self._key is None else self._read_body(view, at)

    def _seek_start(self) -> bool:
        at = self._buf.find(self.marker)
        if at < 0:
            keep = len(self.marker) - 1
            spill = self._buf[:-keep] if len(self._buf) > keep else b""
            self.noise += spill[: max(0, _MAX_NOISE - len(self.noise))]
            del self._buf[: len(spill)]
            return False
        self._begin(self._buf, at)
        del self._buf[: at + len(self.marker)]
        return True

    def _begin(self, read: bytes | bytearray, marker_at: int) -> None:
        """The start marker found at `marker_at` of `read`: what came before it kept as noise
        (up to its cap), the frames read from after it."""
        self.noise += read[: min(marker_at, max(0, _MAX_NOISE - len(self.noise)))]
        self.started = True

    def _read_header(self, data: bytes, at: int) -> int:
        """Reads a header from data[at:] (its start may be held from the last read); returns
        where its frame's body begins."""
        room = _MAX_HEADER - len(self._buf)
        end = data.find(b"\n", at, at + room)
        if end < 0:
            if len(data) - at >= room:
                self.error = "malformed probe output (header too long)"
            self._buf += data[at:]
            return len(data)
        line = bytes(self._buf) + data[at:end] if self._buf else data[at:end]
        self._buf = bytearray()
        match = _HEADER.fullmatch(line)
        if match is None:
            self.error = "malformed probe output (bad frame header)"
            return end + 1
        key, size, packed = match.group(1).decode(), int(match.group(2)), match.group(3)
        if key == "end":
            self.ended = True
            return end + 1
        self._key, self._size, self._parts, self._kept = key, size, [], 0
        self._packed = packed is not None
        self._left = int(packed) if self._packed else size
        if self._packed:
            self._inflater = MemberInflater(self.frame_cap + 1)
        if self._left == 0:
            self._finish_frame()
        return end + 1

    def _read_body(self, view: memoryview, at: int) -> int:
        take = min(self._left, len(view) - at)
        piece = view[at : at + take]
        self._left -= take
        if self._packed:
            if not self._inflater.cut:  # kept whole, to be stored as it came
                self._parts.append(piece)
                self._inflated(self._inflater.feed(piece))
        else:
            room = max(0, self.frame_cap - self._kept)
            if room:
                self._parts.append(piece[:room])
                self._kept += min(take, room)
                self.unpacked += min(take, room)
            if take > room:
                self.cut.add(self._key or "")
        if self._left == 0:
            self._finish_frame()
        return at + take

    def _inflated(self, added: int) -> None:
        """Count what the frame inflated (at most one byte past the frame cap: a frame
        inflating further is cut there)."""
        inflater = self._inflater
        self._kept += added
        self.unpacked += added
        if inflater.error is not None:
            self.error = f"malformed probe output (compressed frame {self._key}: {inflater.error})"
        elif inflater.cut:
            self.cut.add(self._key or "")
            self._parts = []  # the rest is read and dropped

    def _finish_frame(self) -> None:
        assert self._key is not None
        key, inflater = self._key, self._inflater
        if self.error is not None:
            return
        if not self._packed:
            body = b"".join(self._parts)
        else:
            self._inflated(inflater.finish())
            if self.error is not None:
                return
            body = inflater.body()
            if not inflater.cut:  # whole, or not a frame
                if not inflater.whole or len(body) != self._size:
                    self.error = f"malformed probe output (compressed frame {key} is not whole)"
                    return
                member = b"".join(self._parts)
                stream = _zlib_stream(member, inflater.adler)
                if stream is not None:
                    self.packed.add(body, stream)
                    inflater.remember(member, body)
        self.frames[key] = body
        self._key, self._parts, self._inflater = None, [], None
        self._packed = False


def evidence_from_frames(node: str, reader: FrameReader) -> NodeEvidence:
    """Map the probe's frames onto NodeEvidence through the evidence-kind table (fields are
    left empty when absent)."""
    frames = reader.frames
    evidence = NodeEvidence(node=node)
    names: dict[str, str] = {}  # frame key -> the piece's name in `truncated`
    for key, data in frames.items():
        if key == "hostname":
            evidence.hostname = as_text(data).strip()
            continue
        found = kinds.frame_piece(key, frames)
        if found is not None:
            kinds.put(evidence, *found, data, errors="backslashreplace")
            names[key] = kinds.piece_name(*found)
    cut = {key.removeprefix("trunc.") for key in frames if key.startswith("trunc.")}
    cut |= reader.cut
    evidence.truncated = sorted(names.get(key, key) for key in cut)
    if reader.noise.strip():
        evidence.system["output before probe"] = as_text(bytes(reader.noise))
    return evidence


def parse_probe_output(node: str, output: bytes, *, nonce: str = "standalone") -> NodeEvidence:
    """Evidence from a complete probe output captured some other way (e.g. plain ssh); its
    gzipped frames inflated within the default plan's caps (or the output's size, if more)."""
    plan = CollectionPlan()
    reader = FrameReader(
        nonce,
        frame_cap=max(len(output), frame_cap_of(plan)),
        total_cap=max(len(output), plan.max_total_bytes),
    )
    reader.feed(output)
    evidence = evidence_from_frames(node, reader)
    if not reader.ended:
        evidence.status = stopped_short(reader.error or "probe output ended early")
    return evidence


def mark_unfinished(evidence: NodeEvidence, reader: FrameReader) -> None:
    """A probe stopped before its end frame: every rank process without a stack says why,
    and a node cut at its byte cap lists `output` as truncated."""
    if reader.ended:
        return
    for pid in pids_of_ps(evidence.ps):
        if pid not in evidence.pyspy and pid not in evidence.pyspy_errors:
            evidence.pyspy_errors[pid] = "not collected: the probe stopped before py-spy ended"
    if reader.over_cap:
        evidence.truncated.append("output")


def pids_of_ps(ps: str | None) -> list[int]:
    pids = []
    for line in (ps or "").splitlines()[1:]:
        first = line.split(maxsplit=1)[:1]
        if first and first[0].isdecimal() and len(first[0]) <= 10:  # not "²", not 5,000 digits
            pids.append(int(first[0]))
    return pids
