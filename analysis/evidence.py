"""Raw evidence as collected from the nodes, before any parsing.

This is the one shape every source of evidence produces: the SSH collector, an evidence
bundle on disk (docs/bundle-format.md mirrors these fields file for file) and the lab's
test fixtures. Analysis functions take it and never care where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


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
    # Names of artifacts that were cut at the size cap.
    truncated: list[str] = field(default_factory=list)
    collected_at: datetime | None = None
    # "ok", or a short reason the node gave nothing ("unreachable: ...", "host key mismatch").
    status: str = "ok"


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
