"""What one rule concludes (a `Finding`), and the one combiner that weighs them into the verdict.

Every rule (analysis/rules/) reads the facts and returns a finding or nothing: a class, how
strongly its lines support it, the ranks and nodes it blames, the lines themselves, and the
one check that would confirm it. `combine` sees all of them at once, so a rule's silence is
never read as the absence of what it looks for, and a finding that another contradicts is
reported with its alternative instead of hiding it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from analysis.verdict import Alternative, Evidence, Verdict


@dataclass(frozen=True)
class Finding:
    classification: str
    strength: float  # 0..1: how strongly the lines behind it support the class
    summary: str
    suspects: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    check: str = ""  # the one check that would confirm it
    next_steps: tuple[str, ...] = ()
    rule: str = ""

    def alternative(self) -> Alternative:
        return Alternative(
            classification=self.classification,
            confidence=self.strength,
            summary=self.summary,
            suspects=self.suspects,
            suspect_nodes=self.suspect_nodes,
            check=self.check,
            rule=self.rule,
        )


# How many other findings the verdict names as alternatives.
ALTERNATIVES_KEPT = 3


def combine(findings: Sequence[Finding], fallback: Finding) -> Verdict:
    """The verdict: for now the first finding in rule order (the precedence the rules were
    written with), the others kept as alternatives; `fallback` when no rule spoke."""
    chosen = findings[0] if findings else fallback
    others = [f for f in findings[1:] if f.classification != chosen.classification]
    return verdict_of(chosen, others[:ALTERNATIVES_KEPT], findings)


def verdict_of(
    chosen: Finding,
    alternatives: Sequence[Finding],
    findings: Sequence[Finding],
    confidence: float | None = None,
) -> Verdict:
    return Verdict(
        chosen.classification,
        round(chosen.strength if confidence is None else confidence, 2),
        chosen.summary,
        suspects=chosen.suspects,
        suspect_nodes=chosen.suspect_nodes,
        evidence=chosen.evidence,
        next_steps=chosen.next_steps,
        rule=chosen.rule,
        check=chosen.check,
        alternatives=tuple(f.alternative() for f in alternatives),
        findings=tuple(f.alternative() for f in findings),
    )
