"""The reader (collectors/read_ahead.py) on the real ahead worker, as `make run` starts it: it
makes the final verdict of a snapshot it read ahead; killed mid-read (its process gone, its
lease left behind), the final verdict is still stored, by the analysis worker, once the lease
expires."""

from __future__ import annotations

import os
import signal

import pytest

from clusters.importing import cluster_import
from collectors import services
from collectors.models import Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_open
from tests.helpers import child_pids, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _slow_cluster(lab, tmp_path):
    """The lab's cluster with a py-spy that takes its time: the reader is reading meanwhile."""
    slow = tmp_path / "slow-py-spy"
    slow.write_text(f'#!/bin/sh\nsleep 4\nexec {lab.info["cluster"]["pyspy_command"]} "$@"\n')
    slow.chmod(0o755)
    info = {**lab.info, "cluster": {**lab.info["cluster"], "pyspy_command": str(slow)}}
    return cluster_import(info).cluster


@pytest.mark.parametrize("reader", ["lives", "is killed"])
def test_the_final_verdict_with_a_reader_ahead(
    reader, lab_factory, celery_worker_process, tmp_path, bob, settings
):
    settings.HANGDESK_READ_AHEAD_NODES = 1  # the click's choice: this small lab is read ahead
    ahead = celery_worker_process.workers["ahead"]
    lab = lab_factory("healthy", light=True)
    try:
        incident = incident_open(
            opened_by=bob, title="ahead", cluster=_slow_cluster(lab, tmp_path), severity="SEV2"
        )
        snapshot, _ = snapshot_start(incident=incident, by=bob)
        wait_for(
            lambda: Snapshot.objects.filter(pk=snapshot.pk, reader_until__isnull=False).exists(),
            timeout=60,
            what="the reader's lease",
        )
        if reader == "is killed":
            for pid in child_pids(ahead.pid):
                os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.DONE,
            timeout=120,
            what="the final verdict",
        )
        snapshot.refresh_from_db()
        # The verdict the analysis makes from what is stored, whoever made it.
        assert snapshot.whole_diagnosis() == services.snapshot_diagnosed(snapshot)[0]
        made_by_reader = f"final verdict of snapshot {snapshot.pk} made in" in (
            ahead.log_path.read_text()
        )
        assert made_by_reader == (reader == "lives")
    finally:
        assert lab.down() == []
