"""Saving a post-mortem: the sections as the next version, one timeline event, and the rules
of publishing (a refused publish still keeps the text, as its own version)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from core.errors import Conflict, Invalid
from hangdesk.masking import mask_text

from .models import EventKind, Incident, PostMortem, PostMortemStatus, PostMortemVersion
from .postmortem_text import EDITABLE, parse_action_items
from .services import timeline_event_record


def publish_problems(fields: dict[str, Any]) -> list[str]:
    """Why these sections cannot be published yet (empty: they can)."""
    problems = []
    for name, label in (("summary", "a summary"), ("root_cause", "a root cause")):
        if not (fields.get(name) or "").strip():
            problems.append(f"It needs {label}.")
    rows = parse_action_items(fields.get("action_items") or "")
    if not rows:
        problems.append("It needs at least one action item.")
    for row in rows:
        if row["problem"]:
            problems.append(f"Action item “{row['what'][:60]}”: {row['problem']}.")
    return problems


class PublishRefused(Invalid):
    """Publishing was refused; the text was kept as a version of its own (`postmortem`)."""

    field = "status"

    def __init__(self, message: str, postmortem: PostMortem) -> None:
        super().__init__(message)
        self.postmortem = postmortem


def postmortem_save(
    *,
    incident: Incident,
    by: AbstractBaseUser,
    status: str | None = None,
    base_version: int | None = None,
    **fields: Any,
) -> PostMortem:
    """Save the sections (and maybe a new status) as the next version. `base_version` is the
    version the writer started from: if someone saved since, nothing is overwritten. A publish
    that is refused still keeps the text, as a draft (or in-review) version, and raises
    PublishRefused saying why and which version holds it."""
    postmortem, problems = _save(
        incident=incident, by=by, status=status, base_version=base_version, **fields
    )
    if problems:
        label = PostMortemStatus(postmortem.status).label.lower()
        raise PublishRefused(
            "Not published: " + " ".join(problems) + f" Your text is saved as version "
            f"{postmortem.version} ({label}); fix the above and publish again.",
            postmortem,
        )
    return postmortem


@transaction.atomic
def _save(
    *,
    incident: Incident,
    by: AbstractBaseUser,
    status: str | None,
    base_version: int | None,
    **fields: Any,
) -> tuple[PostMortem, list[str]]:
    postmortem = PostMortem.objects.select_for_update().filter(incident=incident).first()
    created = postmortem is None
    postmortem = postmortem or PostMortem(incident=incident)
    if base_version is not None and not created and postmortem.version != base_version:
        last = postmortem.versions.order_by("-number").select_related("author").first()
        who = last.author.get_username() if last and last.author_id else "someone"
        raise Conflict(
            f"{who} saved version {postmortem.version} while you edited version "
            f"{base_version}; your text is still in the form: compare and save again."
        )
    for name in EDITABLE:
        if name in fields:
            # A token pasted with a log line is masked before it is ever stored or shared.
            setattr(postmortem, name, mask_text(fields[name] or ""))
    old_status = postmortem.status
    if status:
        if status not in PostMortemStatus.values:
            raise Invalid(
                f"status must be one of {', '.join(PostMortemStatus.values)}", field="status"
            )
        postmortem.status = status
    content = {name: getattr(postmortem, name) for name in EDITABLE}
    problems = []
    if postmortem.status == PostMortemStatus.PUBLISHED:
        problems = publish_problems(content)
        if problems:  # kept unpublished: a draft, or still in review
            kept = old_status if old_status == PostMortemStatus.IN_REVIEW else None
            postmortem.status = kept or PostMortemStatus.DRAFT
    last = None if created else postmortem.versions.order_by("-number").first()
    if last and last.content == content and last.status == postmortem.status:
        return postmortem, problems  # nothing changed: no new version, no event
    postmortem.written_by = by
    postmortem.version += 1
    postmortem.full_clean()
    postmortem.save()
    PostMortemVersion.objects.create(
        postmortem=postmortem,
        number=postmortem.version,
        status=postmortem.status,
        content=content,
        author=by,
    )
    timeline_event_record(
        incident=incident,
        kind=EventKind.POSTMORTEM,
        summary=_save_summary(created, old_status, postmortem),
        author=by,
        details={
            "classification": postmortem.classification,
            "version": postmortem.version,
            "status": postmortem.status,
        },
    )
    return postmortem, problems


def _save_summary(created: bool, old_status: str, postmortem: PostMortem) -> str:
    label = PostMortemStatus(postmortem.status).label.lower()
    if created:
        return f"Post-mortem written (version 1, {label})"
    if old_status != postmortem.status:
        return f"Post-mortem {label} (version {postmortem.version})"
    return f"Post-mortem updated (version {postmortem.version}, {label})"
