"""The guided workflow to its end: for each class, the questions of its branch, each answered
in advance from a diagnosis with the evidence beside it, and the next actions the branch ends
in (docs/domain.md, "Diagnosis workflow").

A question is a dict: `id`, `question`, `choices` [(value, label)], `suggested` (a value),
`basis` (why, in words) and `evidence` (quoted lines, `Evidence`). The responder confirms the
suggestion or picks another choice; the console records either as a timeline event.
"""

from __future__ import annotations

from typing import Any

from analysis.diagnosis import Diagnosis
from readings.classes import reading
from readings.questions import healthy_rank, suspect

# What the branch's buttons do (the incident page turns each into a form or a link).
SECOND_SNAPSHOT = "second_snapshot"
LOG_TAIL = "log_tail"
ENV_COMPARE = "env_compare"
RESOLVE = "resolve"


def branch(d: Diagnosis, classification: str) -> dict[str, Any]:
    """The branch for `classification` (the responders' call, else the verdict's): its
    questions pre-answered from `d`, and the next actions it ends in."""
    of_class = reading(classification)
    who = suspect(d)
    healthy = healthy_rank(d)
    actions = [SECOND_SNAPSHOT]
    if who.rank is not None:
        actions.append(LOG_TAIL)
    if who.row is not None and who.row.pid and healthy:
        actions.append(ENV_COMPARE)
    actions.append(RESOLVE)
    return {
        "classification": classification,
        "title": of_class.branch_title,
        "questions": of_class.questions(d),
        "actions": actions,
        "suspect": {"rank": who.rank, "node": who.node},
        "healthy": {"rank": healthy.rank, "node": healthy.node} if healthy else None,
    }


def question(d: Diagnosis, classification: str, qid: str) -> dict[str, Any] | None:
    return next((q for q in branch(d, classification)["questions"] if q["id"] == qid), None)
