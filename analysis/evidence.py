"""Raw evidence as collected from the nodes, before any parsing.

This is the one shape every source of evidence produces: the SSH collector, an evidence
bundle on disk (docs/bundle-format.md mirrors these fields file for file) and the lab's
test fixtures. Analysis functions take it and never care where it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_PARTIAL = "partial: "


@dataclass(frozen=True)
class EvidenceStatus:
    """Whether a node's evidence was gathered, and a note for people: why it stopped short
    (gathered, partial: what is there is intact) or why there is none (not gathered)."""

    gathered: bool = True
    note: str = ""

    @property
    def complete(self) -> bool:
        return self.gathered and not self.note

    @property
    def partial(self) -> bool:
        return self.gathered and bool(self.note)

    def describe(self) -> str:
        """For people (and the `status` text older readers of a bundle know): "ok",
        "partial: <why>", or why nothing was gathered."""
        if not self.gathered:
            return self.note or "no evidence"
        return f"{_PARTIAL}{self.note}" if self.note else "ok"

    def to_json(self) -> dict[str, Any]:
        # `status`, the text, for readers of a bundle that predate the typed fields.
        return {"gathered": self.gathered, "note": self.note, "status": self.describe()}

    @classmethod
    def from_json(cls, entry: object, *, cap: int = 200) -> EvidenceStatus:
        """As `to_json` wrote it, or the text alone (older bundles); a bundle is untrusted, so
        the note is cut at `cap` characters and anything else reads as gathered."""
        if not isinstance(entry, Mapping):
            return GATHERED
        gathered, note, text = entry.get("gathered"), entry.get("note"), entry.get("status")
        if isinstance(gathered, bool):
            return cls(gathered, note[:cap] if isinstance(note, str) else "")
        return cls.from_text(text[:cap]) if isinstance(text, str) else GATHERED

    @classmethod
    def from_text(cls, text: str) -> EvidenceStatus:
        """The status as a text (`describe()`, and what bundles and rows written before the
        typed status carry): the only place that reads one."""
        text = text.strip()
        if text in ("", "ok"):
            return cls()
        if text.startswith("partial:"):
            return cls(True, text.removeprefix("partial:").strip() or "stopped short")
        return cls(False, text)


GATHERED = EvidenceStatus()


def not_gathered(note: str) -> EvidenceStatus:
    return EvidenceStatus(False, note)


def stopped_short(note: str) -> EvidenceStatus:
    return EvidenceStatus(True, note)


@dataclass
class NodeEvidence:
    """Everything gathered from one node in one visit. Every field may be missing."""

    node: str
    hostname: str = ""
    # `ps -eo pid,ppid,stat,etimes,args` of the training processes (header line included).
    ps: str | None = None
    # pid -> raw /proc/<pid>/environ (NUL-separated bytes).
    environ: dict[int, bytes] = field(default_factory=dict)
    # pid -> `py-spy dump --json` output, or the plain-text dump when JSON was not available.
    pyspy: dict[int, str] = field(default_factory=dict)
    # pid -> why py-spy gave nothing for that process (stderr, exit status, time-out).
    pyspy_errors: dict[int, str] = field(default_factory=dict)
    # pid -> `py-spy record --format raw --idle --threads` over a short window: each distinct
    # stack ("thread (tid): name;outer (file:line);...;inner (file:line) count"), sampled.
    pyspy_samples: dict[int, str] = field(default_factory=dict)
    dmesg: str | None = None
    nvidia_smi: str | None = None
    # Free-form system facts: `df -h /dev/shm`, load average, ... name -> text.
    system: dict[str, str] = field(default_factory=dict)
    # remote path -> tail of a training / NCCL / launcher log.
    logs: dict[str, str] = field(default_factory=dict)
    # remote path -> flight-recorder dump bytes (pickle or JSON).
    flight_recorder: dict[str, bytes] = field(default_factory=dict)
    # `path:line` for every NCCL_ line found in shell start-up files.
    shell_init: str | None = None
    # `ncclras -f json` (NCCL 2.28.7+) or `ncclras` text: the job's communicators as NCCL's RAS
    # sees them, asked on this node; None when the node has no ncclras or gave nothing.
    ncclras: str | None = None
    # Names of artifacts that were cut at the size cap.
    truncated: list[str] = field(default_factory=list)
    collected_at: datetime | None = None
    # Gathered (whole, or partial with why), or not gathered and why ("unreachable: ...").
    status: EvidenceStatus = GATHERED


@dataclass
class SnapshotEvidence:
    """One observation of the whole cluster."""

    nodes: list[NodeEvidence]
    expected_world_size: int | None = None
    collected_at: datetime | None = None
    cluster: str = ""
    # What the cluster's scheduler said about the job (collectors/scheduler.py's JSON: the
    # job, node states, steps, its commands' output, and `lines`: its words per node), or None.
    scheduler: dict | None = None
