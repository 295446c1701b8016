"""What every rule shares."""

from __future__ import annotations

from collections.abc import Callable

from analysis.facts import Facts
from analysis.findings import Finding

Rule = Callable[[Facts], Finding | None]


def step_text(facts: Facts, ranks) -> str:
    step = facts.step_of(ranks)
    return f" after step {step}" if step is not None else ""
