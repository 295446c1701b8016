"""What every rule shares."""

from __future__ import annotations

from collections.abc import Callable

from analysis.facts import Facts
from analysis.findings import Finding

Rule = Callable[[Facts], Finding | None]


def step_text(facts: Facts) -> str:
    """ " after step N": the highest last step of the ranks waiting in a collective, or of
    every rank when none waits."""
    step = facts.waiting_step
    return f" after step {step}" if step is not None else ""
