"""The guided workflow's answers: each question of a class's branch, confirmed or overridden
by a responder, is one timeline event with its author (kind `answer`).

Answers and class decisions are recorded against a snapshot, and carry to the incident's next
snapshots while the new evidence does not contradict them (a second snapshot taken to tell
slow from dead must not wipe what the responders said about the first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from django.contrib.auth.models import AbstractBaseUser

from analysis.diagnosis import Diagnosis
from readings import branches

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


# --- what stands on a snapshot: its own answers, or those carried from an earlier one -------


@dataclass(frozen=True)
class Standing:
    """A responder's answer (or class decision) as it stands on one snapshot: recorded on it
    (`carried_from` None) or on the earlier snapshot `carried_from`, whose evidence the new one
    does not contradict."""

    event: TimelineEvent
    carried_from: int | None = None
    standing: ClassVar[bool] = True

    @property
    def details(self) -> dict:
        return self.event.details

    @property
    def actor(self) -> str:
        return self.event.actor

    @property
    def at(self):
        return self.event.at


@dataclass(frozen=True)
class Reasked:
    """An earlier snapshot's answer that the new evidence contradicts: shown, not counted."""

    event: TimelineEvent
    snapshot: int
    standing: ClassVar[bool] = False


def _newest(events: list[TimelineEvent], kind: str, snapshot_id: int, match) -> tuple:
    """The newest event of `kind` on this snapshot, and the newest on an earlier one."""
    here = earlier = None
    for event in events:
        if event.kind != kind or not match(event.details):
            continue
        on = event.details.get("snapshot")
        if on == snapshot_id:
            here = event
        elif isinstance(on, int) and on < snapshot_id:
            earlier = event
    return here, earlier


def responders_call(
    events: list[TimelineEvent], snapshot_id: int, verdict_class: str
) -> Standing | Reasked | None:
    """The responders' class decision standing on this snapshot: theirs on it, else theirs on
    an earlier snapshot while the new verdict says what it said then or what they decided
    (a verdict that moved elsewhere asks again)."""
    here, earlier = _newest(events, EventKind.DECISION, snapshot_id, lambda d: True)
    if here is not None:
        return Standing(here)
    if earlier is None:
        return None
    details = earlier.details
    if verdict_class in (details.get("classification"), details.get("suggested")):
        return Standing(earlier, carried_from=details.get("snapshot"))
    return Reasked(earlier, details.get("snapshot"))


def standing_answers(
    events: list[TimelineEvent], snapshot_id: int, branch: str, questions: list[dict]
) -> dict[str, Standing | Reasked]:
    """question id -> the answer standing on this snapshot (its own, else one carried from an
    earlier snapshot), or the earlier answer the new evidence contradicts (Reasked).

    Answers are compared by their labels, which say what was meant ("Rank 3 on lab-node-1"):
    an earlier answer carries while the new pre-answer is the one the responder saw then or
    the one they gave, and their answer is still among the choices."""
    found: dict[str, Standing | Reasked] = {}
    for question in questions:
        qid = question["id"]
        here, earlier = _newest(
            events,
            EventKind.ANSWER,
            snapshot_id,
            lambda d, qid=qid: d.get("branch") == branch and d.get("question_id") == qid,
        )
        if here is not None:
            found[qid] = Standing(here)
        elif earlier is not None:
            found[qid] = _carried(earlier, question)
    return found


def _carried(earlier: TimelineEvent, question: dict) -> Standing | Reasked:
    labels = dict(question["choices"])
    details = earlier.details
    now_suggested = labels.get(question["suggested"], question["suggested"])
    still_offered = details.get("answer_label") in labels.values()
    agrees = now_suggested in (details.get("answer_label"), details.get("suggested_label"))
    if still_offered and agrees:
        return Standing(earlier, carried_from=details.get("snapshot"))
    return Reasked(earlier, details.get("snapshot"))


def guided_state(events: list[TimelineEvent], snapshot_id: int, diagnosis: Diagnosis) -> dict:
    """What stands on a snapshot: the responders' call (or None), the class whose branch is
    asked, the branch with its pre-answered questions, and question id -> standing answer."""
    verdict_class = diagnosis.classification
    call = responders_call(events, snapshot_id, verdict_class)
    classification = (call.details.get("classification") if call and call.standing else "") or (
        verdict_class
    )
    branch = branches.branch(diagnosis, classification)
    return {
        "call": call,
        "classification": classification,
        "branch": branch,
        "answers": standing_answers(events, snapshot_id, classification, branch["questions"]),
    }


def answer_value(standing: Standing | Reasked | None, question: dict) -> str:
    """The choice a question's form shows selected: the standing answer (its label's value in
    today's choices), else the evidence's pre-answer."""
    if isinstance(standing, Standing):
        label = standing.details.get("answer_label")
        for value, choice in question["choices"]:
            if choice == label:
                return value
    return question["suggested"]
