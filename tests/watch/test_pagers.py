"""Pagers beside the webhook: a raise triggers PagerDuty (Events API v2, a dedup key per
incident) and Opsgenie (an alert whose alias is that key), each through the egress policy
(purpose "pager") to a local receiver that checks the documented request shape; the incident's
resolution resolves (PagerDuty) or closes (Opsgenie) what was paged, once."""

from __future__ import annotations

import pytest
from django.utils import timezone

from incidents.services import incident_change_status, incident_open
from tests.watch.pager_receivers import PagerReceiver
from watch import pagers, paging
from watch.models import Watch, WatchRaise
from watch.tasks import pages_resolve_queue, watch_page, watch_page_resolve

pytestmark = pytest.mark.django_db
ROUTING_KEY = "R0ut1ngK3yForAPagerDutyService32"  # 32 characters, as PagerDuty issues them
GENIE_KEY = "eb243592-faa2-4ba2-a551-1afdf565c889"


@pytest.fixture
def raised(cluster, bob):
    watch = Watch.objects.create(
        cluster=cluster, enabled=True, pagerduty_routing_key=ROUTING_KEY,
        opsgenie_api_key=GENIE_KEY,
    )  # fmt: skip
    incident = incident_open(opened_by=bob, title="hang", cluster=cluster, severity="SEV1")
    return WatchRaise.objects.create(
        watch=watch, incident=incident, reason="stalled", raised_at=timezone.now(),
        summary="Watch: no step for 300 s (threshold 120 s)",
        verdict={"classification": "A", "summary": "rank 3 left <!channel>", "suspect_ranks": [3],
                 "suspect_nodes": ["gpu-1"]},
    )  # fmt: skip


def test_pagerduty_is_triggered_with_a_dedup_key_per_incident_then_resolved(raised, settings, bob):
    with PagerReceiver("pagerduty") as receiver:
        settings.PAGERDUTY_EVENTS_URL = receiver.url + "/v2/enqueue"
        watch_page.apply(args=(raised.pk, pagers.PAGERDUTY))
        watch_page.apply(args=(raised.pk, pagers.PAGERDUTY))  # a redelivery sends nothing more
        trigger = receiver.requests[0]
        assert len(receiver.requests) == 1 and trigger["problems"] == []
        body = trigger["body"]
        assert body["event_action"] == "trigger" and body["routing_key"] == ROUTING_KEY
        assert body["dedup_key"] == pagers.dedup_key(raised.incident_id)
        assert body["payload"]["severity"] == "critical"  # SEV1
        assert "A: rank 3 left <!channel>" in body["payload"]["summary"]  # JSON, not markup
        assert body["payload"]["custom_details"]["suspect_ranks"] == [3]
        assert body["links"][0]["href"].endswith(f"/incidents/{raised.incident_id}/")
        raised.refresh_from_db()
        assert raised.paged == {"pagerduty": "sent"}

        incident_change_status(incident=raised.incident, to_status="resolved", by=bob)
        assert paging.pages_to_resolve(raised.incident_id) == [(raised.pk, "pagerduty")]
        watch_page_resolve.apply(args=(raised.pk, pagers.PAGERDUTY))
        watch_page_resolve.apply(args=(raised.pk, pagers.PAGERDUTY))  # resolved once
    resolve = receiver.requests[1]
    assert len(receiver.requests) == 2 and resolve["problems"] == []
    assert resolve["body"] == {"routing_key": ROUTING_KEY, "event_action": "resolve",
                               "dedup_key": body["dedup_key"]}  # fmt: skip
    raised.refresh_from_db()
    assert raised.paged == {"pagerduty": "resolved"}
    summaries = list(raised.incident.events.values_list("summary", flat=True))
    assert "Watch: PagerDuty paged (HTTP 202)" in summaries
    assert "Watch: PagerDuty alert resolved (HTTP 202)" in summaries


def test_opsgenie_gets_an_alert_aliased_by_the_incident_and_its_close(raised, settings, bob):
    with PagerReceiver("opsgenie") as receiver:
        settings.OPSGENIE_API_URL = receiver.url
        watch_page.apply(args=(raised.pk, pagers.OPSGENIE))
        incident_change_status(incident=raised.incident, to_status="resolved", by=bob)
        watch_page_resolve.apply(args=(raised.pk, pagers.OPSGENIE))
    create, close = receiver.requests
    assert create["problems"] == [] and close["problems"] == []
    assert create["headers"]["Authorization"] == f"GenieKey {GENIE_KEY}"
    assert create["body"]["alias"] == pagers.dedup_key(raised.incident_id)
    assert create["body"]["priority"] == "P1" and len(create["body"]["message"]) <= 130
    assert close["path"] == f"/v2/alerts/{create['body']['alias']}/close"
    assert close["query"] == {"identifierType": ["alias"]}


def test_a_refused_or_failing_pager_is_said_on_the_timeline(raised, settings):
    settings.EGRESS_ALLOW = []  # the default policy: pagers reach public addresses only
    with PagerReceiver("pagerduty") as receiver:
        settings.PAGERDUTY_EVENTS_URL = receiver.url + "/v2/enqueue"
        watch_page.apply(args=(raised.pk, pagers.PAGERDUTY))
    assert receiver.requests == []  # never reached
    raised.refresh_from_db()
    assert raised.paged == {"pagerduty": "failed"}
    assert raised.incident.events.filter(
        summary="Watch: PagerDuty page failed for good after 1 attempt: refused by policy"
    ).exists()


def test_resolving_the_incident_queues_the_resolutions_once_committed(
    raised, bob, monkeypatch, django_capture_on_commit_callbacks
):
    WatchRaise.objects.filter(pk=raised.pk).update(paged={"pagerduty": "sent", "opsgenie": "sent"})
    queued = []
    monkeypatch.setattr(watch_page_resolve, "delay", lambda *args: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        incident_change_status(incident=raised.incident, to_status="resolved", by=bob)
    assert sorted(queued) == [(raised.pk, "opsgenie"), (raised.pk, "pagerduty")]
    queued.clear()
    pages_resolve_queue(raised.incident_id)  # what the receiver of the signal runs
    assert len(queued) == 2


def test_only_an_admin_sets_the_pager_keys_and_the_page_never_shows_them(
    cluster, alice, bob, as_user
):
    form = {"enabled": "", "step_time_multiplier": "5", "floor_s": "120",
            "checkpoint_allowance_s": "900", "pagerduty_routing_key": ROUTING_KEY}  # fmt: skip
    url = f"/clusters/{cluster.name}/watch/settings/"
    as_user(bob).post(url, form)  # a responder: the field is disabled, the key not taken
    assert Watch.objects.get(cluster=cluster).pagerduty_routing_key == ""
    admin = as_user(alice)
    assert admin.post(url, form).status_code == 302
    assert Watch.objects.get(cluster=cluster).pagerduty_routing_key == ROUTING_KEY
    admin.post(url, {**form, "pagerduty_routing_key": ""})  # empty keeps it
    assert Watch.objects.get(cluster=cluster).pagerduty_routing_key == ROUTING_KEY
    page = admin.get(f"/clusters/{cluster.name}/watch/form/").content.decode()
    assert "PagerDuty routing key" in page and ROUTING_KEY not in page
