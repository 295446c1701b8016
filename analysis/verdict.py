"""What a rule concludes: a class, the ranks and nodes it blames, and the lines that say so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from analysis.records import as_ints, as_opt_int, as_opt_str, as_str, as_strs
from analysis.stacks import compact_ordered, compact_ranks

CLASSES = ("A", "B", "C", "straggler", "init", "healthy", "unknown")
# A log line can be a megabyte; the diagnosis quotes its first 2,000 characters.
EVIDENCE_TEXT_CAP = 2000
SECOND_SNAPSHOT = "Take a second snapshot in a minute: steps that advance mean slow, not dead."


class QuoteKind(StrEnum):
    """Every kind of line a diagnosis quotes: the engine's own (a stack, a GPU's load, an exit
    code, ...) and every kind a signal may have (`analysis.signals.SIGNAL_KINDS`), which a
    quoted signal keeps. A stored diagnosis reads its kinds back as plain strings, which
    compare equal to these."""

    STACK = "stack"
    STACK_GROUP = "stack group"
    GPU = "gpu"
    EXIT_CODE = "exit_code"
    LOG_ERROR = "log_error"
    WATCHDOG = "watchdog"
    ENV_DIFF = "env_diff"
    NCCL_CONFIG = "nccl_config"
    NCCL_WARN = "nccl_warn"
    NCCL_PEER = "nccl_peer"
    XID = "xid"
    SHELL_INIT = "shell_init"
    PROGRESS = "progress"
    STEP_TIME = "step_time"
    SLOW_RANK = "slow_rank"
    SAMPLES = "samples"
    NODE_UNREACHABLE = "node_unreachable"
    MISSING = "missing"
    FLIGHT_RECORDER = "flight_recorder"
    DMESG_OOM = "dmesg_oom"
    COLLECTIVE = "collective"
    SEGFAULT = "segfault"
    RENDEZVOUS = "rendezvous"
    RAS = "ras"
    RAS_OK = "ras_ok"
    DESYNC = "desync"
    CHECKPOINT = "checkpoint"
    COMM_INIT = "comm_init"  # a rank still setting up its NCCL communicator
    EXCEPTION = "exception"
    FATAL = "fatal"
    KILLED = "killed"
    OOM = "oom"
    GPU_OOM = "gpu_oom"
    EXIT = "exit"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    INIT = "init"
    MISMATCH = "mismatch"
    STRAGGLER = "straggler"
    LINK = "link"
    NODE_STATE = "node_state"
    EVICTED = "evicted"


@dataclass(frozen=True)
class Quote:
    """A line of evidence quoted in a verdict (the raw evidence it came from is a node's
    `analysis.evidence.NodeEvidence`); stored as the verdict's `evidence` list."""

    kind: str  # a QuoteKind
    node: str | None
    rank: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        text = self.text
        if len(text) > EVIDENCE_TEXT_CAP:  # a quoted line is evidence from a node: bounded
            text = text[: EVIDENCE_TEXT_CAP - 1] + "…"
        return {"kind": str(self.kind), "node": self.node, "rank": self.rank, "text": text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Quote:
        get = data.get
        node, rank = as_opt_str(get("node")), as_opt_int(get("rank"))
        return cls(as_str(get("kind")), node, rank, as_str(get("text")))


@dataclass(frozen=True)
class Alternative:
    """Another reading of the same evidence: what a finding the verdict did not take says."""

    classification: str
    confidence: float
    summary: str
    suspects: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    check: str = ""
    rule: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "classification": self.classification,
            "confidence": round(self.confidence, 2),
            "summary": self.summary,
            "suspect_ranks": list(self.suspects),
            "suspect_ranks_compact": compact_ranks(self.suspects),
            "suspect_nodes": list(self.suspect_nodes),
            "check": self.check,
            "rule": self.rule,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Alternative:
        get = data.get
        confidence = get("confidence")
        return cls(
            classification=as_str(get("classification"), "unknown"),
            confidence=float(confidence) if isinstance(confidence, int | float) else 0.0,
            summary=as_str(get("summary")),
            suspects=as_ints(get("suspect_ranks")),
            suspect_nodes=as_strs(get("suspect_nodes")),
            check=as_str(get("check")),
            rule=as_str(get("rule")),
        )


@dataclass(frozen=True)
class Verdict:
    classification: str
    confidence: float
    summary: str
    suspects: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    evidence: tuple[Quote, ...] = ()
    next_steps: tuple[str, ...] = ()
    rule: str = ""  # the name of the rule whose finding the verdict took
    check: str = ""  # the one check that would confirm it
    alternatives: tuple[Alternative, ...] = ()  # other classes the evidence also supports
    findings: tuple[Alternative, ...] = ()  # every rule that spoke, as it spoke


def ranks_text(ranks) -> str:
    """ "rank 3" or "ranks 0-2, 5": how a summary names a set of ranks."""
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {compact_ordered(ranks)}"


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
