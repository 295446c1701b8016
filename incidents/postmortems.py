"""Post-mortems: a draft from what the incident already knows, then the responders' words."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from analysis import guide

from .models import EventKind, Incident, PostMortem, Status
from .services import timeline_event_record

EDITABLE = (
    "summary",
    "impact",
    "classification",
    "root_cause",
    "detection",
    "resolution",
    "action_items",
)


def postmortem_draft(
    incident: Incident, *, diagnosis: dict | None = None, diagnosed_at: datetime | None = None
) -> PostMortem:
    """An unsaved post-mortem prefilled from the latest verdict (`diagnosis`, stored when
    `diagnosed_at`), the decisions and the timeline."""
    diagnosis = diagnosis or {}
    decision = incident.events.filter(kind=EventKind.DECISION).order_by("-at", "-pk").first()
    classification = (decision.details.get("classification") if decision else None) or (
        diagnosis.get("classification", "")
    )
    return PostMortem(
        incident=incident,
        summary=diagnosis.get("summary", incident.description),
        classification=classification,
        detection=_detection(incident, diagnosis, diagnosed_at),
        action_items="\n".join(guide.PREVENTION.get(classification, [])),
    )


def _detection(incident: Incident, diagnosis: dict, diagnosed_at: datetime | None) -> str:
    opened = incident.opened_at
    parts = [f"Incident opened {opened:%Y-%m-%d %H:%M} UTC."]
    if diagnosed_at:
        minutes = (diagnosed_at - opened).total_seconds() / 60
        parts.append(f"Verdict {diagnosis.get('classification')} {minutes:.0f} min later.")
    resolved = incident.events.filter(kind=EventKind.STATUS, details__to=Status.RESOLVED).first()
    if resolved:
        hours = (resolved.at - opened).total_seconds() / 3600
        parts.append(f"Resolved after {hours:.1f} h.")
    return " ".join(parts)


@transaction.atomic
def postmortem_save(*, incident: Incident, by: AbstractBaseUser, **fields: Any) -> PostMortem:
    postmortem = PostMortem.objects.filter(incident=incident).first()
    created = postmortem is None
    postmortem = postmortem or PostMortem(incident=incident)
    for name in EDITABLE:
        if name in fields:
            setattr(postmortem, name, fields[name])
    postmortem.written_by = by
    postmortem.full_clean()
    postmortem.save()
    timeline_event_record(
        incident=incident,
        kind=EventKind.POSTMORTEM,
        summary="Post-mortem written" if created else "Post-mortem updated",
        author=by,
        details={"classification": postmortem.classification},
    )
    return postmortem


def postmortem_view(incident: Incident) -> dict[str, Any]:
    """The stored post-mortem with the pinned timeline and every decision, for the page."""
    return {
        "postmortem": PostMortem.objects.filter(incident=incident).first(),
        "pinned": list(
            incident.events.filter(pinned=True).select_related("author").order_by("at", "pk")
        ),
    }
