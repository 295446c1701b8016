"""Reads for pages and the API, each a fixed number of queries whatever the size: incidents,
their timelines, their post-mortems and versions."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.errors import Invalid
from readings import guide

from .models import (
    EventKind,
    Incident,
    PostMortem,
    PostMortemStatus,
    PostMortemVersion,
    TimelineEvent,
)
from .postmortem_text import EDITABLE, content_markdown, version_diff

# The responders' calls: the class decided on a snapshot, and each guided question answered.
DECISION_KINDS = (EventKind.DECISION, EventKind.ANSWER)


def incident_list(
    *, status: str = "", severity: str = "", cluster: str = "", active_only: bool = False
) -> QuerySet[Incident]:
    incidents = Incident.objects.select_related("cluster", "commander", "opened_by")
    if status:
        incidents = incidents.filter(status=status)
    elif active_only:
        incidents = incidents.filter(status__in=["open", "investigating", "mitigated"])
    if severity:
        incidents = incidents.filter(severity=severity)
    if cluster:
        incidents = incidents.filter(cluster__name=cluster)
    return incidents.order_by("severity", "-opened_at")


def incident_timeline(incident: Incident) -> QuerySet[TimelineEvent]:
    return incident.events.select_related("author").order_by("at", "pk")


# --- post-mortems (drafted: incidents/postmortem_draft.py; saved: postmortem_saving.py) ---


def postmortem_decisions(incident: Incident) -> list[TimelineEvent]:
    """Every decision and guided answer, oldest first, with its author."""
    return list(
        incident.events.filter(kind__in=DECISION_KINDS)
        .select_related("author")
        .order_by("at", "pk")
    )


def version_markdown(version: PostMortemVersion | PostMortem) -> str:
    content = (
        version.content
        if isinstance(version, PostMortemVersion)
        else {name: getattr(version, name) for name in EDITABLE}
    )
    return content_markdown(
        content, classification_label=guide.class_name(content.get("classification", ""))
    )


def postmortem_version_diff(postmortem: PostMortem, old: int, new: int) -> dict[str, Any]:
    """Versions `old` and `new` of a post-mortem and the line diff between them."""
    found = {
        v.number: v
        for v in postmortem.versions.filter(number__in=[old, new]).select_related("author")
    }
    if old not in found or new not in found:
        raise Invalid(f"{postmortem} has versions 1 to {postmortem.version}.")
    return {
        "old": found[old],
        "new": found[new],
        "rows": version_diff(version_markdown(found[old]), version_markdown(found[new])),
    }


def latest_published(postmortem: PostMortem) -> PostMortemVersion | None:
    return (
        postmortem.versions.filter(status=PostMortemStatus.PUBLISHED)
        .select_related("author")
        .order_by("-number")
        .first()
    )
