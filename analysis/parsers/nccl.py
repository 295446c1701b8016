"""Line-level facts from what NCCL and PyTorch's NCCL process group print.

Each public function takes ONE log line and returns facts about it, keeping no state, so the
log reader (`logs.parse_log`) can call them on every line. Every function checks cheap
substrings before any regular expression, and every regular expression is linear by
construction (see the module notes below).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollectiveFact:
    """One rank's position in one process group's sequence of collectives, as one line says."""

    source: str  # "watchdog" | "detail" | "desync"
    rank: int | None
    seq: int | None
    op: str | None
    pg: str | None
    numel_in: int | None
    numel_out: int | None
    dtype: str | None
    shapes: str | None
    last_enqueued: int | None
    last_completed: int | None
    timeout_ms: int | None
    line: str


@dataclass(frozen=True)
class PeerFact:
    """A line in which a rank reports trouble with a named peer: the peer is the likely culprit."""

    peer_rank: int | None
    peer_addr: str | None
    peer_host: str | None
    reason: str
    line: str


@dataclass(frozen=True)
class NcclConfigFact:
    """What NCCL reports choosing on one host: compared across nodes like the environment."""

    host: str | None
    key: str
    value: str
    addresses: tuple[str, ...]
    line: str


@dataclass(frozen=True)
class SlowFact:
    """A framework names a rank as slow (straggler detection)."""

    rank: int
    source: str
    value: float | None
    line: str


def collective_facts(line: str) -> list[CollectiveFact]:
    return []


def peer_fact(line: str) -> PeerFact | None:
    return None


def nccl_config_fact(line: str) -> NcclConfigFact | None:
    return None


def slow_facts(line: str) -> list[SlowFact]:
    return []
