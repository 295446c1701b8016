"""Kernel log (`dmesg -T`, plain `dmesg`, syslog or ISO time): OOM kills, NVRM Xid, segfaults."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

_OOM = re.compile(
    r"(?:Out of memory|Memory cgroup out of memory)?:? ?Killed process (\d+) \(([^)]*)\)"
)
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f:.]+)\): (\d+), (.*)")
_XID_PID = re.compile(r"pid=(\d+)")
# Bounded: a process name is at most 15 characters (TASK_COMM_LEN); `[\w.-]+` searched a 20 KB
# run of name characters quadratically (2.2 s). Searched from just before the marker.
_SEGV = re.compile(r"\b([\w.-]{1,64})\[(\d{1,10})\]: segfault at")
_STAMP = re.compile(r"^\s*(\[[^\]]+\]|\d{4}-\d\d-\d\dT[\d:,.+-]+|\w{3} +\d+ [\d:]+ \S+ kernel:)")

# What an SRE should read from the Xid number (NVIDIA's Xid catalogue, abridged).
XID_MEANING = {
    13: "graphics engine exception (often an application bug)",
    31: "GPU memory page fault (MMU fault)",
    43: "GPU stopped processing",
    45: "preemptive cleanup after a fault",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement / row remapping event",
    64: "ECC page retirement / row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
# Xids after which the GPU cannot be trusted: they explain a dead or stuck rank on their own.
FATAL_XIDS = {48, 62, 64, 74, 79, 95, 119, 120}


@dataclass(frozen=True)
class OomKill:
    pid: int
    process: str
    line: str
    # Wall-clock time of the kill when the line carries one (`dmesg -T`, ISO); None for
    # seconds-since-boot stamps. dmesg -T prints the node's local time: read as UTC.
    at: datetime | None = None


@dataclass(frozen=True)
class XidEvent:
    pci: str
    xid: int
    pid: int | None
    meaning: str
    line: str

    @property
    def fatal(self) -> bool:
        return self.xid in FATAL_XIDS


@dataclass(frozen=True)
class Segfault:
    pid: int
    process: str
    line: str


@dataclass
class KernelFacts:
    oom_kills: list[OomKill]
    xids: list[XidEvent]
    segfaults: list[Segfault]
    problems: list[str]
    # Lines about network and NVLink links (mlx5, InfiniBand, a NIC's link going down), for the
    # line reader to judge (analysis.signals); the first MAX_LINK_LINES of them.
    links: list[str] = field(default_factory=list)


MAX_LINK_LINES = 256
_LINK_HINTS = ("mlx5", "nfiniband", "NVLink", "nvlink", "ink down", "ink is down", "ink is Down")
# What a line `_read_event` takes must hold (an OOM kill, an Xid, a segfault).
_EVENT_MARKERS = ("Killed process", "NVRM: Xid", "segfault at")


_HUMAN_STAMP = re.compile(r"^\s*\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")
_ISO_STAMP = re.compile(r"^\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)")


def _wall_clock(line: str) -> datetime | None:
    human = _HUMAN_STAMP.match(line)
    try:
        if human:
            stamp = datetime.strptime(" ".join(human.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif iso := _ISO_STAMP.match(line):
            stamp = datetime.fromisoformat(iso.group(1))
        else:
            return None
    except ValueError:
        return None
    return stamp.replace(tzinfo=UTC)


def parse_dmesg(text: str | None) -> KernelFacts:
    facts = KernelFacts([], [], [], [])
    if not text:
        return facts
    # A marker or link hint the whole text lacks, no line of it holds: a node's 500 lines
    # are spared ten substring tests each (the text is searched once for each word instead).
    markers = tuple(marker for marker in _EVENT_MARKERS if marker in text)
    hints = tuple(hint for hint in _LINK_HINTS if hint in text)
    lines = text.splitlines()
    stamped = False
    for line in lines:
        if not line.strip():
            continue
        if not stamped:
            stamped = _STAMP.match(line) is not None or "NVRM" in line
        if markers and _holds_any(line, markers) and _read_event(line, facts):
            continue
        if hints and len(facts.links) < MAX_LINK_LINES and _holds_any(line, hints):
            facts.links.append(line.strip()[:1000])
    if lines and not stamped:
        facts.problems.append("no kernel log timestamps found: is this dmesg output?")
    return facts


def _holds_any(line: str, words: tuple[str, ...]) -> bool:
    for word in words:  # noqa: SIM110 (a plain loop: any() of a generator costs more)
        if word in line:
            return True
    return False


def _read_event(line: str, facts: KernelFacts) -> bool:
    """The line's OOM kill, Xid or segfault into `facts`; True when it was one of them (an
    Xid line always is, understood or not)."""
    if "Killed process" in line and (match := _OOM.search(line)):
        facts.oom_kills.append(
            OomKill(int(match.group(1)), match.group(2), line.strip(), _wall_clock(line))
        )
        return True
    if "NVRM: Xid" in line:
        _read_xid(line, facts)
        return True
    if "segfault at" in line and (
        match := _SEGV.search(line, max(0, line.find("]: segfault at") - 80))
    ):
        facts.segfaults.append(Segfault(int(match.group(2)), match.group(1), line.strip()))
        return True
    return False


def _read_xid(line: str, facts: KernelFacts) -> None:
    match = _XID.search(line)
    if match is None:
        facts.problems.append(f"Xid line not understood: {line.strip()[:120]!r}")
        return
    xid = int(match.group(2))
    pid = _XID_PID.search(match.group(3))
    facts.xids.append(
        XidEvent(
            match.group(1),
            xid,
            int(pid.group(1)) if pid else None,
            XID_MEANING.get(xid, "see NVIDIA Xid catalogue"),
            line.strip(),
        )
    )
