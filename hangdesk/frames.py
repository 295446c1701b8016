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


def render_probe(plan: CollectionPlan, *, nonce: str = "standalone", skip_pid: int = 0) -> bytes:
    """The full script for `sh -s`: shell-quoted settings, then the constant probe.
    `skip_pid`: a process of the caller's own that the pattern may match but is no training
    process (`hangdesk collect` itself).

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
    }
    return render_script(PROBE_PATH, settings)


# --- reading the framed output -----------------------------------------------------------

_HEADER = re.compile(rb"HD1 ([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*) (\d{1,12})")
_MAX_HEADER = 200
_MAX_NOISE = 16 * KiB


class FrameReader:
    """Incremental parser of the probe's frames, bounded per frame and in total."""

    def __init__(self, nonce: str, *, frame_cap: int, total_cap: int) -> None:
        self.marker = f"HDPROBE1 {nonce}\n".encode()
        self.frame_cap = frame_cap
        self.total_cap = total_cap
        self.frames: dict[str, bytes] = {}
        self.cut: set[str] = set()  # keys cut locally at frame_cap
        self.noise = bytearray()  # bytes before the start marker (e.g. a chatty .bashrc)
        self.total = 0
        self.started = False
        self.ended = False
        self.error: str | None = None
        self._buf = bytearray()
        self._key: str | None = None
        self._body = bytearray()
        self._left = 0

    @property
    def over_cap(self) -> bool:
        return self.total > self.total_cap

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.ended or self.error is not None:
            return
        self._buf += data
        while self._buf and self.error is None and not self.ended:
            if not self.started:
                if not self._seek_start():
                    return
            elif self._key is None:
                if not self._read_header():
                    return
            else:
                self._read_body()

    def _seek_start(self) -> bool:
        at = self._buf.find(self.marker)
        if at < 0:
            keep = len(self.marker) - 1
            spill = self._buf[:-keep] if len(self._buf) > keep else b""
            self.noise += spill[: max(0, _MAX_NOISE - len(self.noise))]
            del self._buf[: len(spill)]
            return False
        self.noise += self._buf[:at][: max(0, _MAX_NOISE - len(self.noise))]
        del self._buf[: at + len(self.marker)]
        self.started = True
        return True

    def _read_header(self) -> bool:
        end = self._buf.find(b"\n", 0, _MAX_HEADER)
        if end < 0:
            if len(self._buf) >= _MAX_HEADER:
                self.error = "malformed probe output (header too long)"
            return False
        match = _HEADER.fullmatch(bytes(self._buf[:end]))
        del self._buf[: end + 1]
        if match is None:
            self.error = "malformed probe output (bad frame header)"
            return False
        key, size = match.group(1).decode(), int(match.group(2))
        if key == "end":
            self.ended = True
            return False
        self._key, self._left, self._body = key, size, bytearray()
        if size == 0:
            self._finish_frame()
        return True

    def _read_body(self) -> None:
        take = min(self._left, len(self._buf))
        room = max(0, self.frame_cap - len(self._body))
        self._body += self._buf[: min(take, room)]
        if take > room:
            self.cut.add(self._key or "")
        del self._buf[:take]
        self._left -= take
        if self._left == 0:
            self._finish_frame()

    def _finish_frame(self) -> None:
        assert self._key is not None
        self.frames[self._key] = bytes(self._body)
        self._key, self._body = None, bytearray()


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
    """Evidence from a complete probe output captured some other way (e.g. plain ssh)."""
    reader = FrameReader(nonce, frame_cap=len(output), total_cap=len(output))
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
