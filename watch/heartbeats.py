"""The job's own word: the heartbeat token (issued once, stored as its hash) and each
heartbeat a job sends (the step it completed)."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from . import audit
from .models import (
    Heartbeat,
    Watch,
)

TOKEN_PREFIX = "hdw_"  # noqa: S105 - marks a watch heartbeat token, not a secret


def heartbeat_token_issue(
    *, watch: Watch, by: AbstractBaseUser | None = None, via: str = "page", ip: str | None = None
) -> str:
    """A new token for the job's heartbeats (the old one stops working); shown once. Audited."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    Watch.objects.filter(pk=watch.pk).update(
        heartbeat_token_hash=token_hash(token), heartbeat_token_prefix=token[:12]
    )
    audit.heartbeat_token_issued(watch=watch, by=by, prefix=token[:12], via=via, ip=ip)
    return token


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def heartbeat_record(
    *, watch: Watch, step: int, rank: int | None = None, checkpoint: bool = False, node: str = ""
) -> Heartbeat:
    """The job says it completed `step` (two or three small queries)."""
    now = timezone.now()
    key = -1 if rank is None else rank
    previous = Heartbeat.objects.filter(watch=watch, rank=key).first()
    step_time = previous.step_time_s if previous else None
    if previous and step > previous.step:
        step_time = max(0.0, (now - previous.at).total_seconds() / (step - previous.step))
    heartbeat, _ = Heartbeat.objects.update_or_create(
        watch=watch,
        rank=key,
        defaults={
            "step": step,
            "at": now,
            "checkpoint": checkpoint,
            "step_time_s": step_time,
            "node": node[:128],
        },
    )
    return heartbeat
