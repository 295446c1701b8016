"""What the pipeline's steps report, as values: a node's failure, a visit, a step's outcome.

The collector (`remote.py`) says how a visit failed with a `NodeFailure` (a kind and the text
a person reads); the services return one outcome per step; the tasks turn a `Retryable` into
a retry and an outcome with `analysis_due` into the next task. Nothing here parses a status
string to find out what happened. Pure: no Django, no paramiko.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from analysis.evidence import NodeEvidence, not_gathered


class FailureKind(StrEnum):
    """Why a node gave no (complete) evidence."""

    UNREACHABLE = "unreachable"  # refused, timed out, no SSH banner, no answer in time
    CONNECTION_LOST = "connection lost"  # reset or closed mid-way
    SSH_ERROR = "ssh error"  # any other SSH protocol failure
    HOST_KEY = "host key"  # mismatch, rejected or unusable pinned key
    AUTH = "auth"  # the node refused the client key, or there is no usable key
    PROBE = "probe"  # the probe ran but produced nothing usable
    INVALID_PLAN = "invalid plan"  # a cluster setting the probe cannot use
    INTERNAL = "internal"  # a bug on this side
    NODE_REMOVED = "node removed"  # the node left the cluster before its visit

    @property
    def transient(self) -> bool:
        """A retry may give another answer (the network); otherwise it gives the same one."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {FailureKind.UNREACHABLE, FailureKind.CONNECTION_LOST, FailureKind.SSH_ERROR}
)


@dataclass(frozen=True)
class NodeFailure:
    kind: FailureKind
    # For people, and the note of NodeEvidence.status: "unreachable: connection refused by ...".
    text: str

    @property
    def transient(self) -> bool:
        return self.kind.transient


@dataclass
class NodeVisit:
    """One visit to one node: the evidence gathered (maybe partial), and why it failed if it
    did: then `evidence.status` is not gathered, with `failure.text` as its note."""

    evidence: NodeEvidence
    failure: NodeFailure | None = None

    @classmethod
    def failed(cls, evidence: NodeEvidence, failure: NodeFailure) -> NodeVisit:
        evidence.status = not_gathered(failure.text)
        return cls(evidence, failure)


# --- the node step's outcomes --------------------------------------------------------------


@dataclass(frozen=True)
class NotClaimed:
    """Another task owns the node, or its result is already stored: nothing was done."""


@dataclass(frozen=True)
class Collected:
    """The node's evidence is stored (complete, or partial with why in its status's note)."""

    snapshot_id: int
    # This step finished the snapshot's last node: its analysis is due.
    analysis_due: bool


@dataclass(frozen=True)
class Failed:
    """The node is finished as failed; what it gave, if anything, is stored."""

    failure: NodeFailure
    snapshot_id: int
    analysis_due: bool


@dataclass(frozen=True)
class Retryable:
    """A transient failure with attempts left: nothing stored, the claim kept for the retry."""

    failure: NodeFailure
    attempt: int


NodeOutcome = NotClaimed | Collected | Failed | Retryable


@dataclass(frozen=True)
class SweepOutcome:
    """Nodes the stale sweep failed, and the snapshots that thereby became ready."""

    failed: int
    analysis_due: tuple[int, ...]
