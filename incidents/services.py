"""Every write to incidents and their timelines goes through here.

Each state change writes exactly one timeline event, in the same transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from clusters.models import Cluster
from core.errors import Conflict

from .models import STATUS_TRANSITIONS, EventKind, Incident, Severity, Status, TimelineEvent
from .signals import incident_resolved


class InvalidTransition(Conflict):
    """The incident is not in a status from which the requested one can be reached."""


class IncidentClosed(Conflict):
    """A closed incident is read-only: no note, edit, pin, snapshot or decision is added."""


def incident_require_open(incident: Incident | int) -> None:
    """Refuse a write to a closed incident, by the status stored now (not a stale copy's)."""
    pk = incident if isinstance(incident, int) else incident.pk
    closed = Incident.objects.filter(pk=pk, status=Status.CLOSED).values_list("pk", flat=True)
    if closed:
        reference = incident.reference if isinstance(incident, Incident) else f"Incident {pk}"
        raise IncidentClosed(f"{reference} is closed: it is read-only.")


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
    incident_touch(incident.pk)
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


def incident_touch(incident_pk: int) -> None:
    """Tell the open pages something changed (their next poll re-renders)."""
    Incident.objects.filter(pk=incident_pk).update(version=F("version") + 1)


@transaction.atomic
def incident_open(
    *,
    opened_by: AbstractBaseUser,
    title: str,
    cluster: Cluster,
    severity: str = Severity.SEV2,
    description: str = "",
    commander: AbstractBaseUser | None = None,
    source: str = "system",
) -> Incident:
    """A new incident; `source` names who opened it when no person did (the watch, the demo,
    the command line), for the timeline and the post-mortem."""
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
        source=source,
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
    ended = (Status.RESOLVED, Status.CLOSED)
    if to_status in ended and from_status not in ended:
        transaction.on_commit(lambda: incident_resolved.send(sender=Incident, incident=incident))
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
    incident_require_open(incident)
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
    incident_require_open(incident)
    changes = {}
    for name, value in fields.items():
        old = getattr(incident, name)
        if old != value:
            changes[name] = {"from": _plain(old), "to": _plain(value)}
            setattr(incident, name, value)
    if not changes:
        return incident
    # Validate the fields that changed: a system-opened incident has no `opened_by`, and
    # that is not the editor's to fix.
    untouched = [f.name for f in Incident._meta.concrete_fields if f.name not in changes]
    incident.full_clean(exclude=untouched)
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


@transaction.atomic
def incident_acknowledge(*, incident: Incident, by: AbstractBaseUser) -> Incident:
    """ "I have it": the caller becomes commander and an open incident moves to investigating,
    as one timeline event. Conditional like every status move: a concurrent change wins."""
    incident_require_open(incident)
    fields: dict[str, Any] = {}
    if incident.commander_id != by.pk:
        fields["commander"] = by
    moving = incident.status == Status.OPEN
    if moving:
        fields |= {"status": Status.INVESTIGATING, "status_changed_at": timezone.now()}
    if not fields:
        return incident
    updated = Incident.objects.filter(pk=incident.pk, status=incident.status).update(**fields)
    if not updated:
        incident.refresh_from_db()
        raise InvalidTransition(
            f"{incident.reference} was changed meanwhile; it is now {incident.status}."
        )
    previous = _username(incident.commander)
    for name, value in fields.items():
        setattr(incident, name, value)
    parts = []
    if "commander" in fields:
        parts.append(f"commander {previous or '-'} → {by.get_username()}")
    if moving:
        parts.append("status Open → Investigating")
    timeline_event_record(
        incident=incident,
        kind=EventKind.STATUS if moving else EventKind.EDIT,
        summary="Acknowledged: " + ", ".join(parts),
        author=by,
        details={"acknowledged": True, "commander": by.get_username(), "moved": moving},
    )
    return incident


def event_set_pinned(*, event: TimelineEvent, pinned: bool) -> TimelineEvent:
    incident_require_open(event.incident_id)
    TimelineEvent.objects.filter(pk=event.pk).update(pinned=pinned)
    incident_touch(event.incident_id)
    event.pinned = pinned
    return event


def _username(user: AbstractBaseUser | None) -> str:
    return user.get_username() if user else ""


def _plain(value: Any) -> Any:
    if isinstance(value, AbstractBaseUser):
        return value.get_username()
    return value
