"""The guided workflow's answers: each question of a class's branch, confirmed or overridden
by a responder, is one timeline event with its author (kind `answer`)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from .models import EventKind, Incident, TimelineEvent
from .services import incident_require_open, timeline_event_record

NOTE_CHARS = 400


def guided_answer_record(
    *,
    incident: Incident,
    by: AbstractBaseUser,
    snapshot_id: int,
    branch: str,
    question: dict,
    answer: str,
    note: str = "",
) -> TimelineEvent:
    """Record `answer` (one of `question`'s choices, already checked by the caller) to a
    question of `branch` asked about snapshot `snapshot_id`."""
    incident_require_open(incident)
    labels = dict(question["choices"])
    suggested = question["suggested"]
    agreed = answer == suggested
    note = note.strip()[:NOTE_CHARS]
    if agreed:
        words = f"confirmed {labels[answer]}"
    else:
        words = f"overrode {labels.get(suggested, suggested)} with {labels[answer]}"
    summary = f"{question['question']} {words}"
    return timeline_event_record(
        incident=incident,
        kind=EventKind.ANSWER,
        summary=f"{summary} — {note}" if note else summary,
        author=by,
        details={
            "snapshot": snapshot_id,
            "branch": branch,
            "question": question["question"],
            "question_id": question["id"],
            "answer": answer,
            "answer_label": labels[answer],
            "suggested": suggested,
            "suggested_label": labels.get(suggested, suggested),
            "agreed": agreed,
            "note": note,
        },
        pinned=not agreed,
    )


def guided_answers(events: list[TimelineEvent], snapshot_id: int, branch: str) -> dict:
    """question id -> the newest answer event to it, for this snapshot and branch."""
    latest = {}
    for event in events:
        details = event.details
        if (
            event.kind == EventKind.ANSWER
            and details.get("snapshot") == snapshot_id
            and details.get("branch") == branch
        ):
            latest[details.get("question_id")] = event
    return latest
