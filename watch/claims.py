"""Who runs what, once: a period runs only under its watch's claim (a conditional UPDATE that
one task wins, with a lease a killed worker's claim outlives), and a raise's first and second
snapshots are claimed the same way by the task (or its redelivered copy) that starts them."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from hangdesk.budget import TIME_BUDGET

from .models import (
    Watch,
    WatchRaise,
)

# One cluster's period outlives its task (a killed worker's claim expires).
CLAIM_LEASE = TIME_BUDGET.watch_lease


def watch_claim_due(*, now: datetime | None = None, limit: int = 500) -> list[tuple[int, str]]:
    """Claim every enabled watch that is not in flight and was not dispatched within half a
    period; (watch id, claim) for each one this caller won. A duplicate beat tick or a second
    dispatcher wins none of them."""
    now = now or timezone.now()
    due_before = now - timedelta(seconds=settings.WATCH_PERIOD_S * 0.5)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    due = Q(dispatched_at__isnull=True) | Q(dispatched_at__lte=due_before)
    candidates = (
        Watch.objects.filter(free, due, enabled=True)
        .order_by(F("dispatched_at").asc(nulls_first=True))
        .values_list("pk", flat=True)[:limit]
    )
    won = []
    for pk in list(candidates):
        claim = uuid.uuid4().hex
        claimed = Watch.objects.filter(free, due, pk=pk, enabled=True).update(
            claim=claim, claimed_until=now + CLAIM_LEASE, dispatched_at=now
        )
        if claimed:
            won.append((pk, claim))
    return won


def watch_release(*, watch_id: int, claim: str) -> bool:
    """The period is over (its raise and first snapshot included): the next one may start."""
    return bool(Watch.objects.filter(pk=watch_id, claim=claim).update(claim="", claimed_until=None))


def raise_claim_first(*, raise_id: int, task_id: str) -> bool:
    """Only one task (or its redelivered copy) starts the first snapshot."""
    return bool(
        WatchRaise.objects.filter(pk=raise_id, first_snapshot__isnull=True)
        .filter(Q(first_claim="") | Q(first_claim=task_id))
        .update(first_claim=task_id)
    )


def raise_claim_second(*, raise_id: int, task_id: str) -> bool:
    """Only one task (or its redelivered copy) takes the second snapshot."""
    return bool(
        WatchRaise.objects.filter(pk=raise_id, second_snapshot__isnull=True)
        .filter(Q(second_claim="") | Q(second_claim=task_id))
        .update(second_claim=task_id)
    )
