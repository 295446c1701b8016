"""Snapshot cluster, for real: a browser click, a Celery worker, SSH into lab nodes running a
hung torch job, and the evidence and verdict stored with the incident."""

from __future__ import annotations

import pytest

from clusters.importing import cluster_import
from collectors.models import Artifact, NodeStatus, Snapshot, SnapshotStatus
from incidents.models import EventKind
from incidents.services import incident_open

pytestmark = [
    pytest.mark.lab,
    pytest.mark.worker,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def hung_lab(hung_rank_exit_lab):
    return hung_rank_exit_lab  # the session's (the peers stuck, dumped): only observed here


def test_a_click_on_snapshot_collects_every_rank_and_names_the_dead_one(
    hung_lab, celery_worker_process, page, live_server, log_in, bob
):
    cluster = cluster_import(hung_lab.info).cluster
    incident = incident_open(opened_by=bob, title="run stuck", cluster=cluster, severity="SEV1")

    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.click("#snapshot-button")
    page.wait_for_selector("#snapshot-progress[data-status=done]", timeout=120_000)
    page.wait_for_selector("text=A · a rank left or stalled outside the collective")
    page.screenshot(path=str(_screenshot("snapshot-rank-exit.png")), full_page=True)

    snapshot = Snapshot.objects.get()
    assert snapshot.status == SnapshotStatus.DONE
    assert set(snapshot.collections.values_list("status", flat=True)) == {NodeStatus.OK}
    names = set(
        Artifact.objects.filter(collection__snapshot=snapshot).values_list(
            "collection__node_name", "name"
        )
    )
    alive = {0: "lab-node-0", 1: "lab-node-0", 2: "lab-node-1"}
    environs = [n for n in names if n[1].startswith("environ/")]
    stacks = [n for n in names if n[1].startswith("pyspy/") and n[1].endswith(".json")]
    assert len(environs) == len(stacks) == len(alive)  # every live rank: environment and stack
    for node in ("lab-node-0", "lab-node-1"):
        assert (node, "dmesg.txt") in names
        assert (node, "ps.txt") in names
        assert any(n == node and a.startswith("logs/") for n, a in names)
    assert ("lab-node-1", "logs//var/log/train/rank3.log") in names  # the dead rank's log

    diagnosis = snapshot.diagnosis
    expected = hung_lab.expected
    assert diagnosis["classification"] == "A"
    assert diagnosis["missing_ranks"] == expected["missing_ranks"] == [3]
    assert diagnosis["suspect_ranks"] == [3]
    assert diagnosis["last_completed_step"] == expected["last_global_step"]
    assert [row["rank"] for row in snapshot.whole_diagnosis()["per_rank"]] == [0, 1, 2, 3]

    phases = [e.details.get("phase") for e in incident.events.filter(kind=EventKind.SNAPSHOT)]
    assert phases == ["started", "finished"]


def _screenshot(name: str):
    from django.conf import settings

    path = settings.VAR_DIR / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path / name


def test_the_snapshot_command_waits_and_prints_the_diagnosis(
    hung_lab, celery_worker_process, capsys
):
    import json

    from django.core.management import call_command

    cluster_import(hung_lab.info)
    call_command("snapshot", "lab", "--wait", "--json", "--timeout", "120")
    diagnosis = json.loads(capsys.readouterr().out)
    assert diagnosis["classification"] == "A"
    assert diagnosis["missing_ranks"] == [3]
    assert Snapshot.objects.get().incident.title == "Snapshot of lab from the command line"
