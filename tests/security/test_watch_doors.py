"""The watch's doors: the webhook a responder could aim anywhere, the page that carried
evidence into Slack's markup, deliveries that raised, and the watch's unrecorded changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.security.servers import LineServer
from tests.watch.test_services import FakeNodes, stepping, tick
from watch import configure, heartbeats, preflight_runs
from watch.models import NotifyStatus, Watch, WatchRaise
from watch.webhooks import page_body

HOSTILE_FRAME = "<!channel> <https://evil.example/login|Click to re-authenticate> & more"


@pytest.fixture
def watched(cluster, bob):
    return configure.watch_configure(
        cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=10,
        checkpoint_allowance_s=60,
    )  # fmt: skip


@pytest.fixture
def nodes(monkeypatch):
    return FakeNodes(monkeypatch)


def _raise(watched, nodes, url: str) -> WatchRaise:
    Watch.objects.filter(pk=watched.pk).update(webhook_url=url)
    nodes.log = stepping(timezone.now() - timedelta(seconds=60), 40)
    raise_id = tick(Watch.objects.get(pk=watched.pk)).raise_id
    WatchRaise.objects.filter(pk=raise_id).update(
        verdict={"classification": "A", "summary": "rank 3 left", "suspect_ranks": [3]},
        verdict_at=timezone.now(),
    )
    return WatchRaise.objects.get(pk=raise_id)


def test_evidence_in_the_page_cannot_ping_a_channel_or_plant_a_link():
    body = page_body(
        cluster="gpt-train", reason=f"stalled in {HOSTILE_FRAME}",
        verdict={"classification": "A", "summary": f"rank 3 stuck in {HOSTILE_FRAME}",
                 "suspect_ranks": [3], "suspect_nodes": ["<!here>"]},
        incident_ref="INC-7", incident_url="https://hangdesk.example/incidents/7/",
    )  # fmt: skip
    texts = [body["text"]] + [block["text"]["text"] for block in body["blocks"]]
    for text in texts:
        assert "<!channel>" not in text and "<!here>" not in text
        assert "<https://evil" not in text
    verdict = body["blocks"][1]["text"]["text"]
    assert "&lt;!channel&gt; &lt;https://evil.example/login|Click" in verdict
    assert "&amp; more" in body["text"]
    # the console's own link stays a link
    assert "<https://hangdesk.example/incidents/7/|INC-7>" in body["blocks"][0]["text"]["text"]


@pytest.mark.parametrize(
    "answer", [b"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n", b"-ERR wrong number of args\r\n"]
)
def test_a_receiver_answering_no_http_is_retried_and_on_the_timeline(
    watched, nodes, settings, answer
):
    from watch.tasks import watch_notify

    settings.WATCH_WEBHOOK_TIMEOUT_S = 2
    with LineServer(answer) as server:
        raised = _raise(watched, nodes, f"http://127.0.0.1:{server.port}/hook")
        watch_notify.apply(args=(raised.pk,))  # eager: the retries run at once
        assert server.accepted == settings.WATCH_WEBHOOK_ATTEMPTS
    raised.refresh_from_db()
    assert raised.notify_status == NotifyStatus.FAILED and raised.notify_error == "not HTTP"
    summaries = list(raised.incident.events.filter(details__phase="webhook").values_list(
        "summary", flat=True))  # fmt: skip
    assert len(summaries) == settings.WATCH_WEBHOOK_ATTEMPTS
    assert summaries[-1].endswith("failed for good after 5 attempts: not HTTP")


@pytest.mark.parametrize(
    "url", ["http://%00x/hook", "http://x%0d%0a/hook", "http://127.0.0.1:6379/"]
)
def test_a_stored_url_the_policy_refuses_fails_as_refused_not_as_an_exception(
    watched, nodes, settings, url
):
    from watch.tasks import watch_notify

    settings.EGRESS_ALLOW = []  # the default policy: loopback refused
    raised = _raise(watched, nodes, url)  # stored before the policy existed
    watch_notify.apply(args=(raised.pk,))
    raised.refresh_from_db()
    assert raised.notify_status == NotifyStatus.FAILED
    assert raised.notify_error == "refused by policy"
    events = raised.incident.events.filter(details__phase="webhook")
    assert all("refused by policy" in e.summary for e in events) and events.exists()


SETTINGS = {"step_time_multiplier": "4", "floor_s": "90", "checkpoint_allowance_s": "600"}


def _save(client, cluster, **fields):
    from django.urls import reverse

    return client.post(reverse("watch:settings", args=[cluster.name]), {**SETTINGS, **fields})


def test_a_responder_cannot_aim_the_webhook_an_admin_can_and_it_is_audited(
    as_user, bob, alice, cluster
):
    from core.errors import Forbidden
    from core.models import AuditAction, AuditEvent

    secret_path = "https://hooks.slack.com/services/T0/B0/s3cr3tpath"
    answer = _save(as_user(bob), cluster, enabled="on", webhook_url="https://evil.example/x")
    assert answer.status_code == 302 and Watch.objects.get(cluster=cluster).webhook_url == ""
    with pytest.raises(Forbidden):
        configure.watch_configure(
            cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=10,
            checkpoint_allowance_s=60, webhook_url="https://evil.example/x",
        )  # fmt: skip
    assert _save(as_user(alice), cluster, enabled="on", webhook_url=secret_path).status_code == 302
    assert Watch.objects.get(cluster=cluster).webhook_url == secret_path
    rows = list(AuditEvent.objects.filter(action=AuditAction.WATCH_CHANGED).order_by("pk"))
    assert [r.username for r in rows] == ["bob", "alice"]
    assert rows[0].target == "watch of gpt-train: turned on"
    assert "webhook none -> https://hooks.slack.com/… (sha256 " in rows[1].target
    assert "s3cr3tpath" not in rows[1].target


def test_turning_the_watch_off_and_a_new_heartbeat_token_are_audited(as_user, bob, watched):
    from django.urls import reverse

    from core.models import AuditAction, AuditEvent

    client = as_user(bob)
    assert _save(client, watched.cluster).status_code == 302  # "enabled" unticked: off
    assert client.post(reverse("watch:token", args=[watched.cluster.name])).status_code == 200
    rows = list(AuditEvent.objects.filter(username="bob").order_by("pk"))[1:]  # after "on"
    prefix = Watch.objects.get().heartbeat_token_prefix
    assert [r.action for r in rows] == [AuditAction.WATCH_CHANGED, AuditAction.HEARTBEAT_TOKEN]
    assert rows[1].target == f"heartbeat token {prefix}… for gpt-train (the old one stops working)"
    assert rows[0].target.endswith("turned off") and rows[0].ip == "127.0.0.1"


def test_an_admin_cannot_save_a_webhook_aimed_inside(as_user, alice, cluster, settings):
    settings.EGRESS_ALLOW = []
    for url in ("http://127.0.0.1:6379/", "http://169.254.169.254/latest/", "http://0x7f.1/"):
        answer = _save(as_user(alice), cluster, enabled="on", webhook_url=url)
        assert answer.status_code == 400 and b"refused by policy" in answer.content
    assert Watch.objects.get(cluster=cluster).webhook_url == ""


def test_run_preflight_twice_queues_one_node_visit(as_user, bob, cluster, monkeypatch):
    from django.urls import reverse

    from watch import tasks

    queued = []
    monkeypatch.setattr(tasks.preflight_cluster, "delay", lambda *args: queued.append(args))
    client = as_user(bob)
    url = reverse("watch:preflight", args=[cluster.name])
    first, second = client.post(url, follow=True), client.post(url, follow=True)
    assert len(queued) == 1
    assert b"already running" in second.content and b"Preflight started" in first.content
    # the task ends (here: its service fails): the claim goes, the next click queues again
    monkeypatch.setattr(preflight_runs, "preflight_over_ssh", lambda **kw: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        tasks.preflight_cluster(*queued[0])
    client.post(url)
    assert len(queued) == 2


def test_heartbeats_past_the_rate_are_refused_and_ranks_outside_the_world(
    cluster, settings, monkeypatch
):
    from types import SimpleNamespace

    from rest_framework.test import APIClient

    from watch import limits

    clock = SimpleNamespace(at=timezone.now())  # the limiter's second, held still
    monkeypatch.setattr(limits, "timezone", SimpleNamespace(now=lambda: clock.at))
    settings.WATCH_HEARTBEATS_PER_S = 5
    token = heartbeats.heartbeat_token_issue(watch=configure.watch_for(cluster))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    url = f"/api/v1/clusters/{cluster.name}/heartbeat/"
    cluster.expected_world_size = 0
    cluster.save()
    codes = [client.post(url, {"step": s}, format="json").status_code for s in range(20)]
    assert codes == [202] * 5 + [429] * 15
    assert client.post(url, {"step": 21}, format="json")["Retry-After"] == "1"
    clock.at += timedelta(seconds=1)  # the next second takes five more
    assert client.post(url, {"step": 22}, format="json").status_code == 202
    cluster.expected_world_size = 32
    cluster.save()
    outside = client.post(url, {"step": 23, "rank": 32}, format="json")
    assert outside.status_code == 400 and "rank" in outside.json()
    for _ in range(40):  # a world of 32 may push 32 a second
        client.post(url, {"step": 24, "rank": 1}, format="json")
    assert Watch.objects.get().heartbeat_window_count == 32
