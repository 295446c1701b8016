"""A worker process killed in the middle of a node's collection: the task comes back, the
same task resumes its claim, and the node's evidence is stored exactly once."""

from __future__ import annotations

import os
import signal

import pytest

from clusters.importing import cluster_import
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.helpers import child_pids, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_killed_worker_process_redelivers_and_stores_once(
    lab_factory, celery_worker_process, tmp_path, bob
):
    lab = lab_factory("healthy", light=True)
    try:
        # py-spy that takes its time, so the kill lands while the node is being collected.
        slow = tmp_path / "slow-py-spy"
        slow.write_text(f'#!/bin/sh\nsleep 4\nexec {lab.info["cluster"]["pyspy_command"]} "$@"\n')
        slow.chmod(0o755)
        info = {**lab.info, "cluster": {**lab.info["cluster"], "pyspy_command": str(slow)}}
        cluster = cluster_import(info).cluster
        incident = incident_open(opened_by=bob, title="t", cluster=cluster, severity="SEV2")

        snapshot, _ = snapshot_start(incident=incident, by=bob)
        wait_for(
            lambda: NodeCollection.objects.filter(snapshot=snapshot, status="running").exists(),
            timeout=60,
            what="a node being collected",
        )
        victims = child_pids(celery_worker_process.pid)
        for pid in victims:
            os.kill(pid, signal.SIGKILL)

        wait_for(
            lambda: Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.DONE,
            timeout=120,
            what="the snapshot to finish after the kill",
        )
        collections = list(NodeCollection.objects.filter(snapshot=snapshot))
        assert {c.status for c in collections} == {NodeStatus.OK}
        assert max(c.attempts for c in collections) >= 2  # at least one task came back
        for collection in collections:
            stacks = Artifact.objects.filter(
                collection=collection, name__startswith="pyspy/", name__endswith=".json"
            )
            processes = Artifact.objects.filter(collection=collection, name__startswith="environ/")
            assert stacks.count() == processes.count() == 2  # two ranks per node, once each
        log = celery_worker_process.log_path.read_text()
        assert "WorkerLostError" in log or "exited with 'signal 9" in log
    finally:
        assert lab.down() == []
