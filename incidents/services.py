"""Every write to incidents and their timelines goes through here.

Each state change writes exactly one timeline event, in the same transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from clusters.models import Cluster
from core.errors import Conflict

from .models import STATUS_TRANSITIONS, EventKind, Incident, Severity, Status, TimelineEvent


class InvalidTransition(Conflict):
    """The incident is not in a status from which the requested one can be reached."""


def timeline_event_record(
    *,
    incident: Incident,
    kind: str,
    summary: str,
    author: AbstractBaseUser | None = None,
    source: str = "",
    details: dict[str, Any] | None = None,
    at: datetime | None = None,
    pinned: bool = False,
) -> TimelineEvent:
    return TimelineEvent.objects.create(
        incident=incident,
        at=at or timezone.now(),
        kind=kind,
        summary=summary[:500],
        author=author,
        source="" if author else (source or "system"),
        details=details or {},
        pinned=pinned,
    )


@transaction.atomic
def incident_open(
    *,
    opened_by: AbstractBaseUser,
    title: str,
    cluster: Cluster,
    severity: str = Severity.SEV2,
    description: str = "",
    commander: AbstractBaseUser | None = None,
) -> Incident:
    incident = Incident.objects.create(
        title=title,
        cluster=cluster,
        severity=severity,
        description=description,
        commander=commander,
        opened_by=opened_by,
    )
    timeline_event_record(
        incident=incident,
        kind=EventKind.OPENED,
        summary=f"Opened as {severity} on cluster {cluster.name}",
        author=opened_by,
        details={"severity": severity, "cluster": cluster.name, "commander": _username(commander)},
        at=incident.opened_at,
    )
    return incident


@transaction.atomic
def incident_change_status(
    *, incident: Incident, to_status: str, by: AbstractBaseUser, note: str = ""
) -> Incident:
    from_status = incident.status
    if to_status not in STATUS_TRANSITIONS.get(from_status, ()):
        raise InvalidTransition(
            f"{incident.reference} is {from_status}; it cannot move to {to_status}."
        )
    now = timezone.now()
    # Conditional update: of two responders clicking at once, only one moves the incident.
    moved = Incident.objects.filter(pk=incident.pk, status=from_status).update(
        status=to_status, status_changed_at=now
    )
    if not moved:
        incident.refresh_from_db()
        raise InvalidTransition(
            f"{incident.reference} was changed meanwhile; it is now {incident.status}."
        )
    incident.status, incident.status_changed_at = to_status, now
    summary = f"Status {Status(from_status).label} → {Status(to_status).label}"
    timeline_event_record(
        incident=incident,
        kind=EventKind.STATUS,
        summary=f"{summary}: {note}" if note else summary,
        author=by,
        details={"from": from_status, "to": to_status, "note": note},
        at=now,
    )
    return incident


def incident_add_note(
    *, incident: Incident, by: AbstractBaseUser, text: str, pinned: bool = False
) -> TimelineEvent:
    return timeline_event_record(
        incident=incident,
        kind=EventKind.NOTE,
        summary=text,
        author=by,
        details={"text": text},
        pinned=pinned,
    )


@transaction.atomic
def incident_update(*, incident: Incident, by: AbstractBaseUser, **fields: Any) -> Incident:
    """Change severity, commander, title or description; the timeline records what changed."""
    changes = {}
    for name, value in fields.items():
        old = getattr(incident, name)
        if old != value:
            changes[name] = {"from": _plain(old), "to": _plain(value)}
            setattr(incident, name, value)
    if not changes:
        return incident
    incident.full_clean()
    incident.save(update_fields=list(changes))
    described = ", ".join(
        f"{name} {change['from'] or '-'} → {change['to'] or '-'}"
        for name, change in changes.items()
        if name != "description"
    )
    timeline_event_record(
        incident=incident,
        kind=EventKind.EDIT,
        summary=described or "Description edited",
        author=by,
        details=changes,
    )
    return incident


def event_set_pinned(*, event: TimelineEvent, pinned: bool) -> TimelineEvent:
    TimelineEvent.objects.filter(pk=event.pk).update(pinned=pinned)
    event.pinned = pinned
    return event


def _username(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user else ""


def _plain(value: Any) -> Any:
    if isinstance(value, AbstractBaseUser):
        return value.get_username()
    return value
