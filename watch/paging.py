"""The watch's pages, one step each: POST a raise's webhook, trigger a pager for a raise (once,
each attempt on the timeline), and resolve what a raise paged when its incident resolves. The
requests themselves and their bodies: watch/webhooks.py, watch/pagers.py. What runs next:
watch/tasks.py."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from incidents.models import EventKind, Incident
from incidents.services import timeline_event_record

from . import pagers, webhooks
from .models import NotifyStatus, Watch, WatchRaise
from .raises import SOURCE
from .selectors import raise_get


def incident_url(incident: Incident) -> str:
    return settings.HANGDESK_BASE_URL + reverse("pages:incident", args=[incident.pk])


def raise_notify(*, raise_id: int, attempt: int, last_attempt: bool) -> webhooks.Delivery | None:
    """POST the page once; record the attempt on the raise and the incident's timeline.
    None when there is nothing (more) to send."""
    raised = raise_get(raise_id)
    url = raised.watch.webhook_url
    if not url or raised.notify_status == NotifyStatus.SENT:
        return None
    body = webhooks.page_body(
        cluster=raised.watch.cluster.name,
        reason=raised.summary.removeprefix("Watch: "),
        verdict=raised.verdict,
        incident_ref=raised.incident.reference,
        incident_url=incident_url(raised.incident),
    )
    WatchRaise.objects.filter(pk=raise_id).exclude(notify_status=NotifyStatus.SENT).update(
        notify_status=NotifyStatus.SENDING
    )
    delivery = webhooks.post_json(url, body, timeout_s=settings.WATCH_WEBHOOK_TIMEOUT_S)
    now = timezone.now()
    if delivery.ok:
        status, summary = NotifyStatus.SENT, f"Watch: webhook delivered ({delivery.detail})"
    elif last_attempt or not delivery.retryable:
        status = NotifyStatus.FAILED
        attempts = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        summary = f"Watch: webhook failed for good after {attempts}: {delivery.detail}"
    else:
        status = NotifyStatus.SENDING
        summary = f"Watch: webhook attempt {attempt} failed ({delivery.detail}); retrying"
    WatchRaise.objects.filter(pk=raise_id).exclude(notify_status=NotifyStatus.SENT).update(
        notify_status=status,
        notify_attempts=attempt,
        notify_error="" if delivery.ok else delivery.detail[:500],
        notified_at=now if delivery.ok else None,
    )
    timeline_event_record(
        incident=raised.incident,
        kind=EventKind.SYSTEM,
        summary=summary[:500],
        source=SOURCE,
        details={"watch_raise": raise_id, "phase": "webhook", "attempt": attempt,
                 "ok": delivery.ok, "detail": delivery.detail},
        at=now,
    )  # fmt: skip
    return delivery


# --- pagers --------------------------------------------------------------------------------


def pagers_of(watch: Watch) -> dict[str, str]:
    """pager -> its key, for the pagers this watch has."""
    keys = {pagers.PAGERDUTY: watch.pagerduty_routing_key, pagers.OPSGENIE: watch.opsgenie_api_key}
    return {pager: key for pager, key in keys.items() if key}


def _page_of(raised: WatchRaise) -> pagers.Page:
    verdict = raised.verdict or {}
    headline = (
        f"{verdict.get('classification')}: {verdict.get('summary', '')}"
        if verdict
        else "no verdict yet (the snapshots did not finish)"
    )
    cluster = raised.watch.cluster.name
    return pagers.Page(
        dedup_key=pagers.dedup_key(raised.incident_id),
        summary=f"hangdesk {raised.incident.reference} on {cluster}: "
        f"{raised.summary.removeprefix('Watch: ')}. {headline}",
        cluster=cluster,
        severity=raised.incident.severity,
        incident_ref=raised.incident.reference,
        incident_url=incident_url(raised.incident),
        classification=verdict.get("classification"),
        suspect_ranks=tuple(verdict.get("suspect_ranks") or ()),
        suspect_nodes=tuple(verdict.get("suspect_nodes") or ()),
    )


def raise_page(
    *, raise_id: int, pager: str, attempt: int, last_attempt: bool
) -> webhooks.Delivery | None:
    """Trigger one pager for a raise once; record the attempt on the raise and the timeline.
    None when there is nothing (more) to send."""
    raised = WatchRaise.objects.select_related("watch__cluster", "incident").get(pk=raise_id)
    key = pagers_of(raised.watch).get(pager)
    if not key or raised.paged.get(pager) in ("sent", "resolved"):
        return None
    now = timezone.now()
    delivery = pagers.send_trigger(pager, key, _page_of(raised), at=now.isoformat())
    final = delivery.ok or last_attempt or not delivery.retryable
    if final:
        _mark_paged(raise_id, pager, "sent" if delivery.ok else "failed")
    name = "PagerDuty" if pager == pagers.PAGERDUTY else "Opsgenie"
    if delivery.ok:
        summary = f"Watch: {name} paged ({delivery.detail})"
    elif final:
        tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
        summary = f"Watch: {name} page failed for good after {tries}: {delivery.detail}"
    else:
        summary = f"Watch: {name} attempt {attempt} failed ({delivery.detail}); retrying"
    timeline_event_record(
        incident=raised.incident, kind=EventKind.SYSTEM, summary=summary[:500], source=SOURCE,
        details={"watch_raise": raise_id, "phase": "pager", "pager": pager, "attempt": attempt,
                 "ok": delivery.ok, "detail": delivery.detail},
        at=now,
    )  # fmt: skip
    return delivery


def _mark_paged(raise_id: int, pager: str, state: str) -> None:
    with transaction.atomic():
        raised = WatchRaise.objects.select_for_update().get(pk=raise_id)
        raised.paged = {**raised.paged, pager: state}
        raised.save(update_fields=["paged"])


def pages_to_resolve(incident_id: int) -> list[tuple[int, str]]:
    """(raise, pager) for every pager the incident's raises paged and did not resolve."""
    raises = WatchRaise.objects.filter(incident_id=incident_id).select_related("watch")
    return [
        (raised.pk, pager)
        for raised in raises
        for pager, state in raised.paged.items()
        if state == "sent" and pager in pagers_of(raised.watch)
    ]


def raise_page_resolve(*, raise_id: int, pager: str) -> webhooks.Delivery | None:
    """Resolve (PagerDuty) or close (Opsgenie) one pager's alert for a resolved incident."""
    raised = WatchRaise.objects.select_related("watch", "incident").get(pk=raise_id)
    key = pagers_of(raised.watch).get(pager)
    if not key or raised.paged.get(pager) != "sent":
        return None
    note = f"{raised.incident.reference} is {raised.incident.get_status_display().lower()}"
    delivery = pagers.send_resolve(pager, key, pagers.dedup_key(raised.incident_id), note=note)
    name = "PagerDuty" if pager == pagers.PAGERDUTY else "Opsgenie"
    if delivery.ok:
        _mark_paged(raise_id, pager, "resolved")
    timeline_event_record(
        incident=raised.incident, kind=EventKind.SYSTEM,
        summary=f"Watch: {name} alert {'resolved' if delivery.ok else 'not resolved'} "
        f"({delivery.detail})",
        source=SOURCE,
        details={"watch_raise": raise_id, "phase": "pager_resolve", "pager": pager,
                 "ok": delivery.ok, "detail": delivery.detail},
    )  # fmt: skip
    return delivery
