"""The watch's doors: the webhook a responder could aim anywhere, the page that carried
evidence into Slack's markup, deliveries that raised, and the watch's unrecorded changes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.security.servers import LineServer
from tests.watch.test_services import FakeNodes, stepping, tick
from watch import services
from watch.models import NotifyStatus, Watch, WatchRaise
from watch.webhooks import page_body

HOSTILE_FRAME = "<!channel> <https://evil.example/login|Click to re-authenticate> & more"


@pytest.fixture
def watched(cluster, bob):
    return services.watch_configure(
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
