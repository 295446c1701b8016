"""The stale sweep through the real beat and a real worker (finding, and "the whole worker
gone").

Finding: the sweep task carried `time_limit=60` under the default soft limit of 240 s, so
every minute the worker refused it ("soft_time_limit must be less than or equal to
time_limit") and a snapshot whose worker died stayed "collecting" forever. Issue 10's budget
(collectors/budget.py) gave beat's tasks one pair of housekeeping limits (30 s soft, 60 s
hard) and removed the task's own: fixed. The tests below prove it on the path production
uses — beat schedules the sweep, a worker of the default queue runs it — with the sweep's age
shortened by settings (tests/faults/sweep_settings.py: 3 s, every second) instead of the
production 13 minutes.

Must hold when every worker of the ssh queue is gone: each node of the snapshot is failed with
a reason that says so, not before its age; the snapshot leaves "collecting" and is analysed
once; nothing is collected twice; the console still serves the incident.
"""

from __future__ import annotations

import shutil
from datetime import timedelta

import pytest
from django.conf import settings
from django.urls import reverse

from clusters.importing import cluster_import
from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from core.celery import app
from incidents.services import incident_open
from tests.conftest import HOST_KEY
from tests.helpers import wait_for

from . import procs

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
]

SWEEP_SETTINGS = "tests.faults.sweep_settings"


def _effective_limits(task) -> tuple[float, float]:
    soft = task.soft_time_limit or settings.CELERY_TASK_SOFT_TIME_LIMIT
    hard = task.time_limit or settings.CELERY_TASK_TIME_LIMIT
    return soft, hard


def test_every_beat_task_has_a_soft_limit_under_its_hard_limit():
    # What the worker checks before running a task: this failed for the sweep before issue 10.
    app.loader.import_default_modules()  # every app's tasks.py, as a worker loads them
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        soft, hard = _effective_limits(app.tasks[entry["task"]])
        assert 0 < soft <= hard, entry["task"]


def _unreachable_cluster():
    # 127.0.0.1:1 refuses at once; with no ssh worker, nobody even tries.
    nodes = [
        {"name": f"gone-{i}", "address": "127.0.0.1", "port": 1, "host_key": HOST_KEY}
        for i in (0, 1)
    ]
    return cluster_import({"cluster": {"name": "no-worker"}, "nodes": nodes}).cluster


def test_the_whole_ssh_worker_gone_the_sweep_fails_its_nodes(tmp_path, bob, client):
    # A broker of its own: no other test's worker may take the ssh messages.
    redis = procs.PrivateRedis(tmp_path)
    redis.start()
    env = procs.celery_env(SWEEP_SETTINGS, REDIS_URL=redis.url)
    # Beat and one worker for the sweep ("default") and the analysis; none for "ssh".
    worker = procs.start_worker(tmp_path, "housekeeping", ["default", "analysis"], env)
    beat = procs.start_beat(tmp_path, env)
    try:
        incident = incident_open(opened_by=bob, title="t", cluster=_unreachable_cluster())
        with procs.app_broker(redis.url):
            snapshot, created = snapshot_start(incident=incident, by=bob)
        assert created
        wait_for(
            lambda: (
                Snapshot.objects.get(pk=snapshot.pk).status
                in (SnapshotStatus.DONE, SnapshotStatus.FAILED)
            ),
            timeout=120,
            what="the sweep to fail the nodes and the analysis to finish",
        )
        snapshot.refresh_from_db()
        nodes = list(NodeCollection.objects.filter(snapshot=snapshot))
        assert [n.status for n in nodes] == [NodeStatus.FAILED] * 2
        age = timedelta(seconds=3)
        for node in nodes:
            assert node.reason == "no worker finished this node in time (worker lost?)"
            assert node.attempts == 0  # nothing ever visited it
            assert node.finished_at - snapshot.started_at >= age  # not before its age
        assert snapshot.finished_at is not None
        assert "fail_stale_collections" in worker.log_path.read_text()
        assert "soft_time_limit" not in worker.log_path.read_text()
        client.force_login(bob)
        page = client.get(reverse("pages:incident", args=[incident.pk]))
        assert page.status_code == 200
    finally:
        procs.stop(beat)
        procs.stop(worker)
        procs.stop(redis.process)  # with the ssh messages nobody took
