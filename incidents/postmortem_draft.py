"""A post-mortem's draft: a report of what happened, written from the verdict, the responders'
decisions and the timeline, for the responders to correct. Their words are saved as versions
by incidents/postmortem_saving.py; the stored post-mortem and its versions are read by
incidents/selectors.py.

The incidents app knows nothing of snapshots: whoever asks for a draft hands in the latest
diagnosis (typed, `analysis.diagnosis.Diagnosis`) and when it was made.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from analysis.diagnosis import Diagnosis
from readings import guide, stories
from readings import postmortem as story

from .models import (
    EventKind,
    Incident,
    PostMortem,
    Status,
    TimelineEvent,
)
from .postmortem_text import (
    action_item_line,
)
from .selectors import DECISION_KINDS

# Who opened an incident no person opened, by its opening event's source.
OPENERS = {
    "system": "the system",
    "watch": "the watch (the job stopped progressing)",
    "demo": "the demo",
    "cli": "the command line",
}
# Action items drafted from the prevention advice are due this long after the draft.
ACTION_DUE_AFTER = timedelta(days=14)


# --- the draft ---------------------------------------------------------------------------------


def postmortem_draft(
    incident: Incident,
    *,
    diagnosis: Diagnosis | None = None,
    diagnosed_at: datetime | None = None,
    last_step_at: datetime | None = None,
) -> PostMortem:
    """An unsaved post-mortem drafted from the latest diagnosis (made at `diagnosed_at`), the
    responders' decisions and the timeline. The diagnosis is the stored one, masked as it was
    stored (hangdesk/masking). `last_step_at`: when the job stopped moving, where the caller
    read it apart (a diagnosis read without its whole per-rank table: pages/selectors.py)."""
    d = diagnosis
    events = list(incident.events.select_related("author").order_by("at", "pk"))
    decisions = [e for e in events if e.kind in DECISION_KINDS]
    calls = [e for e in decisions if e.kind == EventKind.DECISION]
    final = calls[-1] if calls else None
    classification = (final.details.get("classification") if final else "") or (
        d.classification if d else ""
    )
    times = _times(incident, d, events, diagnosed_at)
    if last_step_at is not None:
        times["stalled"] = last_step_at
    owner = _owner(incident, final)
    due = (times.get("resolved") or timezone.now()).date() + ACTION_DUE_AFTER
    cause = confirmed_cause(decisions, classification)
    return PostMortem(
        incident=incident,
        summary=_summary(incident, d, classification, final, times, cause),
        impact=_impact(d, times),
        classification=classification,
        detection=_detection_markdown(incident, d, times, events, decisions),
        resolution=_resolution(events),
        root_cause=_root_cause(d, classification, decisions, cause),
        contributing_factors=_bullets(_factors(d, times)),
        action_items="\n".join(
            action_item_line(text, owner, due)
            for text in (story.prevention(d, classification, cause) if d else [])
        ),
    )


def confirmed_cause(decisions: list[TimelineEvent], classification: str) -> str | None:
    """Why the rank left, as the responders last answered it in class A's branch (a key of
    readings.stories.CAUSES), or None when they did not say."""
    if classification != "A":
        return None
    answers = [
        e
        for e in decisions
        if e.kind == EventKind.ANSWER
        and e.details.get("branch") == "A"
        and e.details.get("question_id") == "why"
    ]
    return answers[-1].details.get("answer") if answers else None


def _opener(incident: Incident, events: list[TimelineEvent]) -> str:
    """Who opened the incident: a person, else what the system's opening event names."""
    if incident.opened_by_id:
        return incident.opened_by.get_username()
    opened = next((e for e in events if e.kind == EventKind.OPENED), None)
    source = opened.source if opened else ""
    return OPENERS.get(source, f"the {source}" if source else "the system")


def _owner(incident: Incident, final: TimelineEvent | None) -> str:
    """Who the drafted action items go to: the commander, else whoever decided, else whoever
    opened the incident (the writer reassigns them)."""
    for user in (incident.commander, final.author if final else None, incident.opened_by):
        if user is not None:
            return user.get_username()
    return ""


def _times(
    incident: Incident,
    d: Diagnosis | None,
    events: list[TimelineEvent],
    diagnosed_at: datetime | None,
) -> dict[str, datetime | None]:
    started = next(
        (e.at for e in events if e.kind == EventKind.SNAPSHOT and e.details.get("phase")), None
    )
    resolved = next(
        (e.at for e in reversed(events) if e.kind == EventKind.STATUS and _resolves(e)), None
    )
    return {
        "stalled": _last_step_at(d),
        "opened": incident.opened_at,
        "snapshot": started,
        "verdict": diagnosed_at,
        "resolved": resolved,
    }


def _resolves(event: TimelineEvent) -> bool:
    return event.details.get("to") == Status.RESOLVED


def _last_step_at(d: Diagnosis | None) -> datetime | None:
    """When the last step line was written by any rank: when the job stopped moving."""
    stamps = [r.last_step_at for r in d.per_rank if r.last_step_at] if d else []
    return max(stamps) if stamps else None


def _summary(
    incident: Incident,
    d: Diagnosis | None,
    classification: str,
    final: TimelineEvent | None,
    times: dict,
    cause: str | None = None,
) -> str:
    parts = []
    if d:
        parts.append(story.what_happened(d, classification, cause))
    elif incident.description:
        parts.append(incident.description)
    if final:
        who = final.actor
        suggested = final.details.get("suggested")
        verb = (
            "confirmed"
            if final.details.get("agreed")
            else f"overrode the console's {suggested} with"
        )
        parts.append(f"Responders ({who}) {verb} {guide.class_name(classification)}.")
    if times.get("resolved") and times.get("opened"):
        took = _duration(times["opened"], times["resolved"])
        parts.append(f"The incident was resolved {took} after it was opened.")
    return " ".join(p for p in parts if p)


def _impact(d: Diagnosis | None, times: dict) -> str:
    world = d.world_size if d else 0
    start = times.get("stalled") or times.get("opened")
    end = times.get("resolved")
    if not world or not start:
        return "Fill in: GPU-hours lost, steps redone since the last checkpoint, who waited."
    if not end:
        return (
            f"{world} ranks idle since {start:%Y-%m-%d %H:%M} UTC (not resolved when drafted). "
            "Fill in: steps redone since the last checkpoint, who waited."
        )
    hours = max((end - start).total_seconds(), 0) / 3600
    return (
        f"{world} ranks idle for {_duration(start, end)} "
        f"(≈ {world * hours:.1f} GPU-hours at one GPU per rank), from the last completed step "
        f"{d.last_completed_step} to resolution. "
        "Fill in: steps redone since the last checkpoint, who waited."
    )


def _detection_markdown(
    incident: Incident,
    d: Diagnosis | None,
    times: dict,
    events: list[TimelineEvent],
    decisions: list[TimelineEvent],
) -> str:
    rows = []
    if times.get("stalled") and d:
        rows.append((times["stalled"], f"Last step line written (step {d.max_step})"))
    rows.append((times["opened"], f"Incident opened by {_opener(incident, events)}"))
    if times.get("snapshot"):
        rows.append((times["snapshot"], "First snapshot of the cluster"))
    rows += _verdict_rows(events, d, times)
    for event in decisions:
        rows.append((event.at, f"{event.actor}: {decision_words(event)}"))
    if times.get("resolved"):
        rows.append((times["resolved"], "Marked resolved"))
    table = ["| Time (UTC) | What |", "|---|---|"]
    table += [
        f"| {at:%Y-%m-%d %H:%M:%S} | {what.replace('|', '/')} |"
        for at, what in sorted(rows, key=lambda r: r[0])
    ]
    opened, spans = times["opened"], []
    if times.get("stalled"):
        spans.append(
            f"Time to detect (last step → incident): {_duration(times['stalled'], opened)}."
        )
    if decisions:
        took = _duration(opened, decisions[0].at)
        spans.append(f"Time to diagnose (incident → first decision): {took}.")
    if times.get("resolved"):
        spans.append(
            f"Time to resolve (incident → resolved): {_duration(opened, times['resolved'])}."
        )
    text = "\n".join(table) + ("\n\n" + " ".join(spans) if spans else "")
    quality = story.evidence_quality(d) if d else []
    if quality:
        text += (
            "\n\nEvidence quality (the console's own reading, not a cause): "
            + "; ".join(quality)
            + "."
        )
    return text


def _verdict_rows(events: list[TimelineEvent], d: Diagnosis | None, times: dict) -> list[tuple]:
    """The console's verdicts as the timeline recorded them: the first, then each change of
    class (a second snapshot that says the same is no news); the latest diagnosis when the
    timeline has none."""
    rows, last = [], None
    for event in events:
        details = event.details
        if event.kind != EventKind.SNAPSHOT or details.get("phase") != "finished":
            continue
        classification = details.get("classification") or ""
        if classification and classification != last:
            name = guide.class_name(classification)
            on = f"snapshot {details.get('snapshot')}"
            rows.append((event.at, f"Console's verdict ({on}): {name}"))
            last = classification
    if not rows and times.get("verdict") and d:
        rows.append((times["verdict"], f"Console's verdict: {guide.class_name(d.classification)}"))
    return rows


def decision_words(event: TimelineEvent) -> str:
    details = event.details
    if event.kind == EventKind.ANSWER:
        verb = "confirmed" if details.get("agreed") else "overrode"
        return f"{verb} “{details.get('question', '')}” → {details.get('answer_label', '')}"
    verb = "confirmed" if details.get("agreed") else "overrode the verdict with"
    return f"{verb} {guide.class_name(details.get('classification', ''))}"


def _resolution(events: list[TimelineEvent]) -> str:
    moves = [e for e in events if e.kind == EventKind.STATUS and _resolves(e)]
    if not moves:
        return "Fill in: what was done to get the job going again."
    last = moves[-1]
    note = last.details.get("note") or ""
    text = f"Marked resolved by {last.actor} at {last.at:%Y-%m-%d %H:%M} UTC."
    return f"{text} {note}".strip() if note else text + " Fill in: what was done."


def _root_cause(
    d: Diagnosis | None,
    classification: str,
    decisions: list[TimelineEvent],
    cause_key: str | None = None,
) -> str:
    """What the responders concluded first (their notes and overrides), then the cause: the
    one they confirmed, beside what the evidence alone showed when that differs."""
    concluded = []
    for event in decisions:
        note = (event.details.get("note") or "").strip()
        overrode = event.kind == EventKind.ANSWER and not event.details.get("agreed")
        if note or overrode:
            what = decision_words(event) if overrode else ""
            concluded.append(f"- {event.actor}: {'; '.join(p for p in (what, note) if p)}")
    parts = []
    if concluded:
        parts.append("Responders concluded:\n\n" + "\n".join(concluded))
    if classification == "A" and d:
        cause = stories.departure_cause(d, cause_key)
        if cause.rank is not None and cause.confirmed:
            text = f"Cause (the responders' answer): rank {cause.rank} was {cause.words}."
            if cause.evidence_key != cause.key:
                alone = stories.CAUSES[cause.evidence_key]
                text += f" The evidence alone showed: {alone}."
            parts.append(text)
        elif cause.rank is not None:
            parts.append(f"Evidence: rank {cause.rank} was {cause.words}.")
    elif d:
        parts.append(f"Evidence: {story.cause_story(d, classification)}")
    return "\n\n".join(parts) or "Fill in: why it happened."


def _factors(d: Diagnosis | None, times: dict) -> list[str]:
    factors = story.contributing_factors(d) if d else []
    if times.get("stalled") and times.get("opened"):
        idle = (times["opened"] - times["stalled"]).total_seconds()
        if idle > 600:
            factors.insert(
                0,
                f"The job sat idle {_duration(times['stalled'], times['opened'])} before anyone "
                "opened an incident: nothing alerted on the step lines stopping.",
            )
    return factors or [
        "Fill in: what made it worse or slower to find (the evidence shows nothing)."
    ]


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items)


def _duration(start: datetime, end: datetime) -> str:
    seconds = max((end - start).total_seconds(), 0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
