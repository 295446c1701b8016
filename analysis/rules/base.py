"""What every rule shares: how a finding is made, and how sure "stuck" is."""

from __future__ import annotations

from collections.abc import Callable

from analysis.facts import Facts
from analysis.findings import Finding
from analysis.verdict import SECOND_SNAPSHOT

Rule = Callable[[Facts], Finding | None]


def stuck(facts: Facts) -> tuple[float, str, tuple[str, ...]]:
    """How sure "stuck" is: proven (no step for too long, nothing moved) or merely assumed."""
    if facts.progress.progressing is False:
        return 1.0, "", ()
    return 0.8, " (one look, nothing proves it stuck: slow or dead?)", (SECOND_SNAPSHOT,)


def finding(facts: Facts, classification: str, strength: float, summary: str, **kw) -> Finding:
    """A finding of a stuck job: its strength damped, and a second look advised, while
    nothing proves the job stopped."""
    damp, hint, first_steps = stuck(facts)
    return Finding(
        classification,
        round(strength * damp, 2),
        summary + hint,
        next_steps=first_steps + tuple(kw.pop("next_steps", ())),
        **kw,
    )


def step_text(facts: Facts, ranks) -> str:
    step = facts.step_of(ranks)
    return f" after step {step}" if step is not None else ""
