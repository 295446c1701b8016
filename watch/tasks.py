"""The watch's Celery tasks: its SSH work (a period's node reads, a preflight) on the `ssh`
queue beside the snapshots' visits, the rest on `default`; limits from hangdesk/budget.py.

    beat: watch_dispatch (every WATCH_PERIOD_S)
      -> watch_cluster(watch, claim)            one per watched cluster, under its claim
           -> on a raise: the first snapshot at once (collectors' snapshot_start)
           -> watch_second_snapshot(raise)      WATCH_SECOND_SNAPSHOT_AFTER_S later
                -> watch_follow(raise)          until the second snapshot is diagnosed
                     -> watch_notify(raise)     the webhook, retried with backoff

Each step is a function of its own module (claims, period, raises, paging, preflight_runs);
this module decides what runs next.
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import transaction

import core.celery  # noqa: F401  (the configured app, before any task is sent)
from collectors.starts import snapshot_start
from hangdesk.budget import TIME_BUDGET

from . import claims, limits, paging, period, preflight_runs, raises, selectors
from .models import NotifyStatus

FOLLOW_EVERY_S = 2
FOLLOW_FOR_S = 900  # a raise whose snapshots give nothing in 15 min pages without a verdict
SECOND_WAIT_EVERY_S = 2


class WebhookFailed(Exception):
    """The receiver did not take the page (raised for `autoretry_for`)."""


TICK = TIME_BUDGET.watch_tick_task  # a period, a preflight
STEP = TIME_BUDGET.housekeeping_task  # the dispatch, a raise's steps, a page's delivery
# A page (the webhook, a pager) is retried with exponential backoff until the last attempt.
DELIVERY = {
    "bind": True,
    "autoretry_for": (WebhookFailed,),
    "retry_backoff": settings.WATCH_WEBHOOK_BACKOFF_S,
    "retry_backoff_max": 300,
    "retry_jitter": False,
    "max_retries": settings.WATCH_WEBHOOK_ATTEMPTS - 1,
    "soft_time_limit": STEP.soft_s,
    "time_limit": STEP.hard_s,
}


@shared_task(soft_time_limit=STEP.soft_s, time_limit=STEP.hard_s)
def watch_dispatch() -> int:
    """Beat's tick: claim every watched cluster that is due and not in flight."""
    claimed = claims.watch_claim_due()
    for watch_id, claim in claimed:
        watch_cluster.delay(watch_id, claim)
    return len(claimed)


@shared_task(bind=True, soft_time_limit=TICK.soft_s, time_limit=TICK.hard_s)
def watch_cluster(self, watch_id: int, claim: str) -> str:
    try:
        outcome = period.watch_tick(watch_id=watch_id, claim=claim)
        if outcome.raise_id is not None and outcome.needs_first_snapshot:
            start_raise_snapshots(outcome.raise_id, task_id=self.request.id or claim)
    finally:
        # A worker killed before this line leaves the claim to expire (claims.CLAIM_LEASE).
        claims.watch_release(watch_id=watch_id, claim=claim)
    return outcome.state or "not claimed"


def start_raise_snapshots(raise_id: int, *, task_id: str) -> None:
    """The first snapshot at once; the second one a short interval later."""
    if not claims.raise_claim_first(raise_id=raise_id, task_id=task_id):
        return
    raised = selectors.raise_get(raise_id)
    with transaction.atomic():
        snapshot, _ = snapshot_start(incident=raised.incident, source=raises.SOURCE)
        first = raises.raise_record_snapshot(raise_id=raise_id, snapshot=snapshot, which="first")
    if first:
        watch_second_snapshot.apply_async(
            (raise_id,), countdown=settings.WATCH_SECOND_SNAPSHOT_AFTER_S
        )


@shared_task(bind=True, max_retries=300, soft_time_limit=STEP.soft_s, time_limit=STEP.hard_s)
def watch_second_snapshot(self, raise_id: int) -> str:
    raised = selectors.raise_get(raise_id)
    if raised.second_snapshot_id is not None:
        return "taken"
    if selectors.snapshot_is_active(raised.first_snapshot_id):
        # One snapshot runs per incident at a time: wait for the first to finish ...
        if self.request.retries < self.max_retries:
            raise self.retry(countdown=SECOND_WAIT_EVERY_S)
        # ... but not forever: page with what there is.
        watch_follow.delay(raise_id)
        return "first snapshot still running: no second one"
    if not claims.raise_claim_second(raise_id=raise_id, task_id=self.request.id):
        return "claimed elsewhere"
    with transaction.atomic():
        snapshot, _ = snapshot_start(incident=raised.incident, source=raises.SOURCE)
        raises.raise_record_snapshot(raise_id=raise_id, snapshot=snapshot, which="second")
    watch_follow.apply_async((raise_id,), countdown=FOLLOW_EVERY_S)
    return "started"


@shared_task(
    bind=True,
    max_retries=FOLLOW_FOR_S // FOLLOW_EVERY_S,
    soft_time_limit=STEP.soft_s,
    time_limit=STEP.hard_s,
)
def watch_follow(self, raise_id: int) -> str:
    """Wait for the second snapshot's diagnosis, then record the verdict and page."""
    raised = selectors.raise_get(raise_id)
    waiting = selectors.snapshot_is_active(raised.second_snapshot_id)
    if waiting and self.request.retries < self.max_retries:
        raise self.retry(countdown=FOLLOW_EVERY_S)
    recorded = raises.raise_record_verdict(raise_id=raise_id)
    if recorded is not None and recorded.notify_status == NotifyStatus.WAITING:
        watch_notify.delay(raise_id)
    if recorded is not None:
        for pager in paging.pagers_of(recorded.watch):
            watch_page.delay(raise_id, pager)
    return "verdict" if recorded else "already recorded"


@shared_task(**DELIVERY)
def watch_page(self, raise_id: int, pager: str) -> str:
    """Trigger one pager (PagerDuty, Opsgenie) for a raise, retried like the webhook."""
    return _deliver(
        self, lambda **attempt: paging.raise_page(raise_id=raise_id, pager=pager, **attempt)
    )


@shared_task(soft_time_limit=STEP.soft_s, time_limit=STEP.hard_s)
def watch_page_resolve(raise_id: int, pager: str) -> str:
    delivery = paging.raise_page_resolve(raise_id=raise_id, pager=pager)
    return delivery.detail if delivery else "nothing to resolve"


def pages_resolve_queue(incident_id: int) -> None:
    """The incident resolved: resolve every pager its raises paged."""
    for raise_id, pager in paging.pages_to_resolve(incident_id):
        watch_page_resolve.delay(raise_id, pager)


@shared_task(**DELIVERY)
def watch_notify(self, raise_id: int) -> str:
    return _deliver(self, lambda **attempt: paging.raise_notify(raise_id=raise_id, **attempt))


def _deliver(task, send) -> str:
    """One attempt of a page: `send(attempt=, last_attempt=)` returns the delivery (None: there
    was nothing to send); a retryable failure before the last attempt is retried."""
    attempt = task.request.retries + 1
    last = attempt >= settings.WATCH_WEBHOOK_ATTEMPTS
    delivery = send(attempt=attempt, last_attempt=last)
    if delivery is None:
        return "nothing to send"
    if delivery.retryable and not last:
        raise WebhookFailed(delivery.detail)
    return delivery.detail


@shared_task(soft_time_limit=TICK.soft_s, time_limit=TICK.hard_s)
def preflight_cluster(cluster_id: int, claim: str = "") -> bool:
    try:
        return preflight_runs.preflight_over_ssh(cluster_id=cluster_id).ok
    finally:
        # A worker killed before this line leaves the claim to expire (limits.LEASE).
        if claim:
            limits.preflight_release(cluster_id=cluster_id, claim=claim)
