"""Every write to share links: create (the token is returned once), revoke, and open (which
records the view). Opening answers the same None for a revoked, expired, altered or unknown
token, so the caller cannot tell them apart and neither can the visitor."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, Invalid
from incidents.models import EventKind, Incident, PostMortem
from incidents.selectors import latest_published
from incidents.services import timeline_event_record

from .documents import freeze_published
from .models import ShareHit, ShareLink, ShareView

DEFAULT_DAYS = 7
MAX_DAYS = 90
TOKEN_BYTES = 32  # 256 bits: 43 URL-safe characters
# A token longer than this is not looked up at all.
MAX_TOKEN_CHARS = 64
USER_AGENT_CHARS = 300


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@transaction.atomic
def share_link_create(
    *,
    incident: Incident,
    by: AbstractBaseUser,
    label: str = "",
    days: int = DEFAULT_DAYS,
    include_evidence: bool = False,
) -> tuple[ShareLink, str]:
    """A new link to the incident's published post-mortem; returns the link and its token,
    which is never stored and cannot be shown again."""
    if not 1 <= days <= MAX_DAYS:
        raise Invalid(f"A link expires after 1 to {MAX_DAYS} days.", field="days")
    postmortem = PostMortem.objects.filter(incident=incident).first()
    if postmortem is None or latest_published(postmortem) is None:
        raise Conflict("Publish the post-mortem first: a share link shows its published version.")
    freeze_published(incident, postmortem)  # a version published before freezing existed
    token = secrets.token_urlsafe(TOKEN_BYTES)
    link = ShareLink.objects.create(
        incident=incident,
        token_hash=token_hash(token),
        label=label.strip()[:120],
        include_evidence=include_evidence,
        created_by=by,
        expires_at=timezone.now() + timedelta(days=days),
    )
    what = "post-mortem and evidence summary" if include_evidence else "post-mortem"
    timeline_event_record(
        incident=incident,
        kind=EventKind.POSTMORTEM,
        summary=f"Share link created ({what}, {days} days)"
        + (f": {link.label}" if link.label else ""),
        author=by,
        details={"share_link": link.pk, "days": days, "evidence": include_evidence},
    )
    return link, token


@transaction.atomic
def share_link_revoke(*, link: ShareLink, by: AbstractBaseUser) -> ShareLink:
    now = timezone.now()
    # Conditional: of two revokes at once, one records it.
    revoked = ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(
        revoked_at=now, revoked_by=by
    )
    link.refresh_from_db()
    if revoked:
        timeline_event_record(
            incident=link.incident,
            kind=EventKind.POSTMORTEM,
            summary="Share link revoked" + (f": {link.label}" if link.label else ""),
            author=by,
            details={"share_link": link.pk},
        )
    return link


def share_link_open(*, token: str, ip: str | None, user_agent: str) -> ShareLink | None:
    """The live link for `token`, with this view recorded; None for anything else."""
    if not token or len(token) > MAX_TOKEN_CHARS:
        return None
    link = (
        ShareLink.objects.select_related("incident", "incident__cluster")
        .filter(token_hash=token_hash(token), revoked_at__isnull=True)
        .filter(expires_at__gt=timezone.now())
        .first()
    )
    if link is None:
        return None
    now = timezone.now()
    ShareView.objects.filter(at__lt=now - view_keep()).delete()  # outside readers' data ages out
    ShareView.objects.create(
        link=link, at=now, ip=ip or None, user_agent=user_agent[:USER_AGENT_CHARS]
    )
    return link


def view_keep() -> timedelta:
    """How long a view (when, address, user agent) is kept: SHARE_VIEW_KEEP_DAYS (90)."""
    return timedelta(days=getattr(settings, "SHARE_VIEW_KEEP_DAYS", 90))


def view_limit() -> tuple[int, timedelta]:
    """How many shared-page requests one address may make per window."""
    limit = getattr(settings, "SHARE_VIEW_LIMIT", 30)
    seconds = getattr(settings, "SHARE_VIEW_WINDOW_SECONDS", 60)
    return limit, timedelta(seconds=seconds)


def share_hit_allowed(ip: str | None) -> bool:
    """Count one request for a shared page from `ip`; False once the address is over the
    limit for the window (a refused request is not counted, so the window still ends)."""
    limit, window = view_limit()
    now = timezone.now()
    ShareHit.objects.filter(at__lt=now - window).delete()
    if ShareHit.objects.filter(ip=ip or None, at__gte=now - window).count() >= limit:
        return False
    ShareHit.objects.create(ip=ip or None, at=now)
    return True
