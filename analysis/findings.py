"""What one rule concludes (a `Finding`), and the one combiner that weighs them into the verdict.

Every rule (analysis/rules/) reads the facts and returns a finding or nothing: a class, how
strongly its lines support it, the ranks and nodes it blames, the lines themselves, and the
one check that would confirm it. `combine` sees all of them at once, so a rule's silence is
never read as the absence of what it looks for:
- "healthy" and "straggler" are claims of motion: they stand only while nothing says stuck
  (`Context.stuck`: a rank gone, a timeout, ranks split across collectives, the flight
  recorder's unmatched entries). One such signal and the stuck findings decide.
- Of the stuck findings, a strong one beats a medium one, a medium one a weak one; within a
  band the rule order (`rules.RULES`, most explanatory first) decides.
- A strong finding of another class is a real alternative: the verdict keeps the stronger,
  lowers its confidence and names the other (`Verdict.alternatives`).
- Findings of the same class that blame the same ranks corroborate: their lines join the
  verdict's and its confidence rises a little.
- A stuck verdict on one look, where nothing proves the job stopped, is damped and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from analysis.verdict import SECOND_SNAPSHOT, Alternative, Quote, Verdict

MOTION = frozenset({"healthy", "straggler"})
# Classes that claim the job is stuck: what one look cannot prove.
STUCK_CLASSES = frozenset({"A", "B", "C"})
STRONG = 0.8
MEDIUM = 0.5
ALTERNATIVES_KEPT = 3
# How much a strong rival of another class takes off the verdict's confidence, at most.
RIVAL_DISCOUNT = 0.3
CORROBORATION_BONUS = 0.05
CORROBORATED_CAP = 0.98
# One look, nothing proves the job stopped: a stuck verdict is this much less sure.
ONE_LOOK_DAMP = 0.8
ONE_LOOK_HINT = " (one look, nothing proves it stuck: slow or dead?)"


@dataclass(frozen=True)
class Finding:
    classification: str
    strength: float  # 0..1: how strongly the lines behind it support the class
    summary: str
    suspects: tuple[int, ...] = ()
    suspect_nodes: tuple[str, ...] = ()
    evidence: tuple[Quote, ...] = ()
    check: str = ""  # the one check that would confirm it
    next_steps: tuple[str, ...] = ()
    rule: str = ""

    @property
    def band(self) -> int:
        return 2 if self.strength >= STRONG else 1 if self.strength >= MEDIUM else 0

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


@dataclass(frozen=True)
class StuckSignal:
    """One line or fact that says the job is not simply moving."""

    kind: str  # gone, timeout, split, unmatched, stopped, ...
    rank: int | None
    node: str | None
    text: str


@dataclass(frozen=True)
class Context:
    """What the combiner needs besides the findings."""

    stuck: tuple[StuckSignal, ...] = ()
    proven_stopped: bool = False  # nothing moved for many step times, or between two looks
    moving: bool = False  # steps advanced (between looks, or recently after the warm-up)


def combine(findings: Sequence[Finding], fallback: Finding, context: Context) -> Verdict:
    """The verdict from every finding (in rule order); `fallback` when none can stand."""
    motion = [f for f in findings if f.classification in MOTION]
    if motion and not context.stuck:
        # A straggler is a moving job with a measured slow rank: more than "healthy".
        chosen = next((f for f in motion if f.classification == "straggler"), motion[0])
        return _verdict(chosen, _others(findings, chosen), findings)
    candidates = [f for f in findings if f.classification not in MOTION]
    if not candidates:
        candidates = [fallback]
    order = {id(f): i for i, f in enumerate(candidates)}
    chosen = max(candidates, key=lambda f: (f.band, -order[id(f)]))
    chosen = _corroborated(chosen, candidates)
    rivals = [
        f for f in candidates if f.classification != chosen.classification and f.strength >= STRONG
    ]
    confidence = chosen.strength
    if rivals and chosen.strength >= STRONG:
        strongest = max(f.strength for f in rivals)
        confidence -= RIVAL_DISCOUNT * strongest / max(chosen.strength, strongest)
    if chosen.classification in STUCK_CLASSES and not context.proven_stopped:
        confidence *= ONE_LOOK_DAMP
        chosen = replace(
            chosen,
            summary=chosen.summary + ONE_LOOK_HINT,
            next_steps=(SECOND_SNAPSHOT, *chosen.next_steps),
        )
    if motion and chosen.classification in STUCK_CLASSES:
        chosen = replace(chosen, summary=_despite_motion(chosen.summary))
    return _verdict(chosen, _others(findings, chosen), findings, confidence)


def _others(findings: Sequence[Finding], chosen: Finding) -> list[Finding]:
    """The alternatives: findings of other classes, strongest first."""
    others = [f for f in findings if f.classification != chosen.classification]
    others.sort(key=lambda f: -f.strength)
    return others[:ALTERNATIVES_KEPT]


def _corroborated(chosen: Finding, candidates: Sequence[Finding]) -> Finding:
    """Other findings of the same class blaming the same ranks (or, blaming none, the same
    nodes) add their lines and a little confidence."""
    blamed, nodes = set(chosen.suspects), set(chosen.suspect_nodes)
    agreeing = [
        f
        for f in candidates
        if f is not chosen
        and f.classification == chosen.classification
        and f.strength >= MEDIUM
        and ((blamed & set(f.suspects)) or (not blamed and nodes & set(f.suspect_nodes)))
    ]
    if not agreeing:
        return chosen
    lines = list(chosen.evidence)
    for other in agreeing:
        lines += [e for e in other.evidence if e not in lines]
    strength = min(CORROBORATED_CAP, chosen.strength + CORROBORATION_BONUS * len(agreeing))
    return replace(chosen, strength=max(strength, chosen.strength), evidence=tuple(lines))


def _despite_motion(summary: str) -> str:
    return f"{summary} Steps advanced, which does not outweigh this."


def _verdict(
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
