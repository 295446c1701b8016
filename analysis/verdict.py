"""What a rule concludes: a class, the ranks and nodes it blames, and the lines that say so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from analysis.stacks import compact_ranks

CLASSES = ("A", "B", "C", "straggler", "init", "healthy", "unknown")
# A log line can be a megabyte; the diagnosis quotes its first 2,000 characters.
EVIDENCE_TEXT_CAP = 2000
SECOND_SNAPSHOT = "Take a second snapshot in a minute: steps that advance mean slow, not dead."


@dataclass(frozen=True)
class Evidence:
    kind: str  # stack, gpu, dmesg_oom, exit_code, log_error, watchdog, env_diff, ...
    node: str | None
    rank: int | None
    text: str

    def to_json(self) -> dict[str, Any]:
        text = self.text
        if len(text) > EVIDENCE_TEXT_CAP:  # a quoted line is evidence from a node: bounded
            text = text[: EVIDENCE_TEXT_CAP - 1] + "…"
        return {"kind": self.kind, "node": self.node, "rank": self.rank, "text": text}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Evidence:
        node, rank, text = data.get("node"), data.get("rank"), data.get("text")
        return cls(
            kind=str(data.get("kind") or ""),
            node=node if isinstance(node, str) else None,
            rank=rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
            text=text if isinstance(text, str) else "",
        )


@dataclass(frozen=True)
class Verdict:
    classification: str
    confidence: float
    summary: str
    suspects: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    next_steps: tuple[str, ...] = ()
    rule: str = ""  # the name of the rule that spoke


def ranks_text(ranks) -> str:
    """ "rank 3" or "ranks 0-2, 5": how a summary names a set of ranks."""
    ranks = sorted(set(ranks))
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {compact_ranks(ranks)}"


def capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
