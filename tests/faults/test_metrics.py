"""/metrics: Prometheus text format, read from the database and the broker, for allowed
scrapers only."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from console import metrics
from core.services import worker_heartbeat_record
from incidents.services import incident_open

from . import procs

pytestmark = pytest.mark.django_db

# One sample line of the text format: name{labels} value
SAMPLE = re.compile(r'^[a-z_]+(\{[a-z]+="[^"\n]*"\})? -?[0-9.]+(e[+-]?[0-9]+)?$')


def _scrape(client, **headers) -> dict[str, float]:
    response = client.get(reverse("metrics"), **headers)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    values = {}
    for line in response.content.decode().splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP hangdesk_", "# TYPE hangdesk_")), line
            continue
        assert SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    return values


def _snapshot(cluster, bob, status, took_s, nodes):
    incident = incident_open(opened_by=bob, title="t", cluster=cluster)
    started = timezone.now() - timedelta(seconds=took_s + 5)
    finished = started + timedelta(seconds=took_s) if status != SnapshotStatus.RUNNING else None
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, status=status)
    # started_at is set on creation: moved back here as if it had run that long.
    Snapshot.objects.filter(pk=snapshot.pk).update(started_at=started, finished_at=finished)
    for name, (node_status, reason, node_s) in nodes.items():
        NodeCollection.objects.create(
            snapshot=snapshot, node_name=name, address="127.0.0.1", status=node_status,
            reason=reason, started_at=started,
            finished_at=started + timedelta(seconds=node_s) if node_s is not None else None,
        )  # fmt: skip
    return snapshot


def test_it_counts_snapshots_durations_failures_queues_and_heartbeats(client, cluster, bob):
    _snapshot(cluster, bob, SnapshotStatus.DONE, 20, {
        "a": (NodeStatus.OK, "", 3), "b": (NodeStatus.FAILED, "unreachable: refused", 0.5),
    })  # fmt: skip
    _snapshot(cluster, bob, SnapshotStatus.DONE, 400, {
        "a": (NodeStatus.FAILED, "auth failed: root@a: key is passphrase-protected", 0.1),
        "b": (NodeStatus.FAILED, "no worker finished this node in time (worker lost?)", 800),
    })  # fmt: skip
    _snapshot(cluster, bob, SnapshotStatus.RUNNING, 0, {"a": (NodeStatus.PENDING, "", None)})
    worker_heartbeat_record(hostname="ssh@w1", at=timezone.now() - timedelta(seconds=90))
    worker_heartbeat_record(hostname="ssh@w2", at=timezone.now() - timedelta(seconds=10))

    values = _scrape(client)
    assert values['hangdesk_snapshots{status="done"}'] == 2
    assert values['hangdesk_snapshots{status="running"}'] == 1
    assert values['hangdesk_snapshots{status="failed"}'] == 0
    name = "hangdesk_snapshot_duration_seconds"
    assert values[f'{name}_bucket{{le="30"}}'] == 1
    assert values[f'{name}_bucket{{le="600"}}'] == 2
    assert values[f'{name}_bucket{{le="+Inf"}}'] == values[f"{name}_count"] == 2
    assert values[f"{name}_sum"] == pytest.approx(420, abs=0.01)
    assert values['hangdesk_node_collection_duration_seconds_bucket{le="1"}'] == 2
    assert values["hangdesk_node_collection_duration_seconds_count"] == 4
    assert values['hangdesk_node_failures{kind="unreachable"}'] == 1
    assert values['hangdesk_node_failures{kind="auth"}'] == 1
    assert values['hangdesk_node_failures{kind="worker lost"}'] == 1
    assert values['hangdesk_node_failures{kind="host key"}'] == 0
    assert values["hangdesk_broker_up"] == 1
    for queue in ("ssh", "analysis", "default"):
        assert values[f'hangdesk_queue_depth{{queue="{queue}"}}'] >= 0
    assert values['hangdesk_heartbeat_age_seconds{hostname="ssh@w1"}'] >= 90
    assert 10 <= values["hangdesk_beat_heartbeat_age_seconds"] < 90


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_queue_depth_is_what_waits_in_the_broker(client, tmp_path):
    from core.celery import app

    redis = procs.PrivateRedis(tmp_path)  # no worker of the suite consumes from it
    redis.start()
    try:
        with procs.app_broker(redis.url):
            before = _scrape(client)
            with app.connection_for_write() as conn:
                producer = conn.Producer()
                for queue, count in (("ssh", 3), ("analysis", 1)):
                    for _ in range(count):
                        producer.publish({"probe": 1}, routing_key=queue, serializer="json")
            after = _scrape(client)
    finally:
        procs.stop(redis.process)
    for queue in ("ssh", "analysis", "default"):
        assert before[f'hangdesk_queue_depth{{queue="{queue}"}}'] == 0
    assert after['hangdesk_queue_depth{queue="ssh"}'] == 3
    assert after['hangdesk_queue_depth{queue="analysis"}'] == 1
    assert after['hangdesk_queue_depth{queue="default"}'] == 0


def test_a_broker_that_does_not_answer_is_a_zero_not_an_error(client, settings):
    with procs.app_broker("redis://127.0.0.1:1/0"):  # nothing listens on port 1
        values = _scrape(client)
    assert values["hangdesk_broker_up"] == 0
    assert not any(k.startswith("hangdesk_queue_depth") for k in values)


def test_only_allowed_networks_or_the_token_may_scrape(client, settings):
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    settings.METRICS_TOKEN = "scrape-token-for-tests"
    url = reverse("metrics")
    assert client.get(url, REMOTE_ADDR="192.0.2.7").status_code == 403
    assert client.get(url, REMOTE_ADDR="127.0.0.1").status_code == 403  # loopback not listed
    assert client.get(url, REMOTE_ADDR="10.1.2.3").status_code == 200
    bearer = {"HTTP_AUTHORIZATION": "Bearer scrape-token-for-tests"}
    assert client.get(url, REMOTE_ADDR="192.0.2.7", **bearer).status_code == 200
    wrong = {"HTTP_AUTHORIZATION": "Bearer scrape-token-for-test"}
    assert client.get(url, REMOTE_ADDR="10.1.2.3", **wrong).status_code == 403
    assert client.post(url, REMOTE_ADDR="10.1.2.3").status_code == 405


def test_failure_kinds_follow_the_reasons_the_collector_writes():
    assert metrics.failure_kind("host key mismatch: expected SHA256:x") == "host key"
    assert metrics.failure_kind("probe failed: internal error: boom") == "internal"
    assert metrics.failure_kind("probe failed: exit status 1: no output") == "probe"
    assert metrics.failure_kind("connection lost: during SSH handshake") == "connection lost"
    assert metrics.failure_kind("something new") == "other"
