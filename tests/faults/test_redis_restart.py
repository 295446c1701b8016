"""Redis restarted in the middle of a snapshot: a Redis this test starts on its own loopback
port (append-only file on, as a broker that must not lose messages runs; never the machine's
shared Redis), real workers on it, a real sshd with a slow py-spy.

Must hold: the workers reconnect by themselves; the snapshot finishes "done"; every node is
collected and its evidence stored once (a task redelivered after the restart finds its claim
and resumes it, or finds the node finished and stores nothing); the console serves the
incident throughout.
"""

from __future__ import annotations

import shutil

import pytest
from django.urls import reverse

from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.helpers import wait_for

from . import procs
from .test_web_faults import _slow_cluster

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_redis_restarted_mid_snapshot(tmp_path, bob, client, sshd, ranks):
    redis = procs.PrivateRedis(tmp_path)
    redis.start()
    env = procs.celery_env(REDIS_URL=redis.url)
    workers = []
    try:
        workers.append(procs.start_worker(tmp_path, "ssh", ["ssh", "default"], env, 2))
        workers.append(procs.start_worker(tmp_path, "analysis", ["analysis"], env, 1))
        workers.append(procs.start_worker(tmp_path, "early", ["early"], env, 1))
        cluster = _slow_cluster(sshd, ranks, tmp_path, "redis-drill")
        incident = incident_open(opened_by=bob, title="t", cluster=cluster)
        with procs.app_broker(redis.url):
            snapshot, _ = snapshot_start(incident=incident, by=bob)
        wait_for(
            lambda: NodeCollection.objects.filter(snapshot=snapshot, status="running").exists(),
            timeout=60,
            what="a node being collected",
        )
        redis.restart()  # mid-snapshot
        client.force_login(bob)
        assert client.get(reverse("pages:incident", args=[incident.pk])).status_code == 200
        wait_for(
            lambda: Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.DONE,
            timeout=180,
            what="the snapshot to finish after the restart",
        )
        collections = list(NodeCollection.objects.filter(snapshot=snapshot))
        assert {c.status for c in collections} == {NodeStatus.OK}
        for collection in collections:
            stacks = Artifact.objects.filter(collection=collection, name__startswith="pyspy/")
            names = list(Artifact.objects.filter(collection=collection).values_list("name"))
            assert stacks.exists() and len(names) == len(set(names))
        log = workers[0].log_path.read_text()
        assert "Connection to broker lost" in log  # the restart really reached the worker
        # ...and every worker lived through it: holding an unacknowledged message (the running
        # visit; the provisional verdict's countdown) no longer makes kombu end the worker.
        for worker in workers:
            assert worker.poll() is None, worker.log_path.read_text()[-3000:]
            assert "Unrecoverable error" not in worker.log_path.read_text()
    finally:
        for worker in workers:
            procs.stop(worker)
        procs.stop(redis.process)
