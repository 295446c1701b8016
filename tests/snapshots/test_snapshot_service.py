"""Starting a snapshot, claiming node work, and surviving redelivery — without the lab."""

import dataclasses
import time
from datetime import timedelta

import pytest

from clusters.services import cluster_create, node_create
from collectors import fanout
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.node_work import node_collection_fail_stale, node_work_claim
from collectors.services import SnapshotRefused
from collectors.starts import snapshot_start
from collectors.tasks import collect_nodes
from hangdesk.budget import TIME_BUDGET
from incidents.models import EventKind
from incidents.services import incident_open
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_retry_wait(monkeypatch):
    monkeypatch.setattr(fanout, "TIME_BUDGET", dataclasses.replace(TIME_BUDGET, retry_delay_s=0))


def visit(ids, task_id, *, steal=False):
    return fanout.batch_visit(
        collection_ids=tuple(ids), task_id=task_id, fanout=8,
        steal_until=time.monotonic() + 60 if steal else 0.0,
    )  # fmt: skip


@pytest.fixture
def incident(bob, cluster):
    # cluster's nodes are 127.0.9.1-2:22, where nothing listens: every visit is refused.
    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


def test_it_creates_one_visit_per_node_and_says_so(
    incident, bob, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued:
        snapshot, created = snapshot_start(incident=incident, by=bob)
    assert created
    assert sorted(snapshot.collections.values_list("node_name", flat=True)) == ["gpu-0", "gpu-1"]
    assert set(snapshot.collections.values_list("status", flat=True)) == {NodeStatus.PENDING}
    event = incident.events.get(kind=EventKind.SNAPSHOT)
    assert event.summary == f"Snapshot {snapshot.pk} started: 2 nodes"
    assert event.author == bob
    assert len(queued) == 1  # the node tasks go out only after the rows are committed


def test_a_second_click_returns_the_running_snapshot(incident, bob):
    first, _ = snapshot_start(incident=incident, by=bob)
    second, created = snapshot_start(incident=incident, by=bob)
    assert not created
    assert second.pk == first.pk
    assert Snapshot.objects.count() == 1
    assert incident.events.filter(kind=EventKind.SNAPSHOT).count() == 1


def test_a_cluster_without_nodes_is_refused(bob):
    empty = cluster_create(name="empty")
    incident = incident_open(opened_by=bob, title="x", cluster=empty, severity="SEV3")
    with pytest.raises(SnapshotRefused, match="has no nodes"):
        snapshot_start(incident=incident, by=bob)


def test_an_unreachable_node_is_retried_once_then_failed_with_its_reason(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-0")
    outcome = visit([collection.pk], "task-1")
    assert (outcome.visited, outcome.taken, outcome.analysis_due) == (1, 0, ())  # gpu-1 pending
    collection.refresh_from_db()
    assert collection.status == NodeStatus.FAILED
    assert (collection.attempts, collection.task_id) == (2, "task-1")
    assert collection.reason.startswith("unreachable: connection refused by 127.0.9.1:22")
    assert collection.finished_at is not None


def test_another_task_cannot_take_a_node_already_claimed(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-0")
    NodeCollection.objects.filter(pk=collection.pk).update(
        status=NodeStatus.RUNNING, task_id="owner"
    )
    assert node_work_claim(task_id="intruder", collection_ids=(collection.pk,)) == []
    assert [
        w.node_name for w in node_work_claim(task_id="t", snapshot_id=snapshot.pk, limit=9)
    ] == ["gpu-1"]
    collection.refresh_from_db()
    assert (collection.status, collection.task_id, collection.attempts) == (
        NodeStatus.RUNNING, "owner", 0,
    )  # fmt: skip


def test_a_redelivered_task_after_completion_stores_nothing_twice(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-1")
    assert visit([collection.pk], "t").visited == 1
    stored = Artifact.objects.filter(collection=collection).count()
    assert stored > 0  # a failed node keeps its record of why
    assert visit([collection.pk], "t").visited == 0
    assert Artifact.objects.filter(collection=collection).count() == stored


def test_the_last_node_moves_the_snapshot_to_analysis_once(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    outcomes = [
        visit([collection.pk], f"t{collection.pk}")
        for collection in snapshot.collections.order_by("node_name")
    ]
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
    assert [o.analysis_due for o in outcomes] == [(), (snapshot.pk,)]  # the analysis queued once


def test_a_batch_with_room_takes_the_pending_nodes_of_another_batch(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    first, second = snapshot.collections.order_by("node_name")
    outcome = visit([first.pk], "a", steal=True)
    assert (outcome.visited, outcome.taken, outcome.analysis_due) == (2, 1, (snapshot.pk,))
    assert set(snapshot.collections.values_list("task_id", "status")) == {("a", NodeStatus.FAILED)}
    assert visit([second.pk], "b", steal=True).visited == 0  # its own task finds it taken


def test_the_last_pending_nodes_are_taken_in_halves_so_the_takers_end_together(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    # Two left, room for both: one taker gets half; the other the rest, not nothing.
    first = node_work_claim(task_id="a", snapshot_id=snapshot.pk, limit=2)
    second = node_work_claim(task_id="b", snapshot_id=snapshot.pk, limit=2)
    assert [len(first), len(second)] == [1, 1]
    assert {w.node_name for w in first + second} == {"gpu-0", "gpu-1"}
    assert node_work_claim(task_id="c", snapshot_id=snapshot.pk, limit=2) == []


def test_a_batch_taking_the_last_nodes_in_shares_visits_every_one(incident, bob, cluster):
    for index in range(2, 7):
        node_create(cluster=cluster, name=f"gpu-{index}", address=f"127.0.9.{index + 1}",
                    port=22, username="root", key_path="/etc/hangdesk/id_ed25519",
                    host_key=HOST_KEY)  # fmt: skip
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    first = snapshot.collections.order_by("node_name").first()
    # Room for all seven in one batch: the other six taken 3, then 2 after a visit ended, then 1.
    outcome = visit([first.pk], "a", steal=True)
    assert (outcome.visited, outcome.taken, outcome.analysis_due) == (7, 6, (snapshot.pk,))
    assert set(snapshot.collections.values_list("task_id", "status")) == {("a", NodeStatus.FAILED)}


def test_work_abandoned_by_a_lost_worker_is_failed_and_the_snapshot_finishes(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    swept = node_collection_fail_stale(older_than=timedelta(seconds=-1))
    assert (swept.failed, swept.analysis_due) == (2, (snapshot.pk,))
    assert node_collection_fail_stale(older_than=timedelta(seconds=-1)).failed == 0
    reasons = set(snapshot.collections.values_list("reason", flat=True))
    assert reasons == {"no worker finished this node in time (worker lost?)"}
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING


def test_the_node_task_visits_its_batch_then_queues_the_analysis_once(
    incident, bob, django_capture_on_commit_callbacks
):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    ids = list(snapshot.collections.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks() as queued:
        result = collect_nodes.apply(args=(ids,), task_id="task-1")
    assert result.get() == "2 nodes (0 taken from other batches)"
    assert set(snapshot.collections.values_list("status", "attempts")) == {(NodeStatus.FAILED, 2)}
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
    assert len(queued) == 1  # the analysis, once the finish is committed


def test_a_snapshot_goes_out_in_batches_of_the_fan_out(incident, bob, settings, monkeypatch):
    settings.HANGDESK_SSH_FANOUT = 1
    sent = []
    monkeypatch.setattr(collect_nodes, "delay", lambda batch: sent.append(batch))
    from collectors.tasks import _visit_nodes

    _visit_nodes((5, 6, 7))
    assert sent == [(5,), (6,), (7,)]


def test_a_node_that_failed_drops_the_gpu_series_read_at_the_click(incident, bob):
    import zlib

    from collectors.gpumetrics import DCGM_ARTIFACT

    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-0")
    Artifact.objects.create(
        collection=collection, name=DCGM_ARTIFACT, compressed=zlib.compress(b"{}"), size=2
    )
    visit([collection.pk], "task-1")
    collection.refresh_from_db()
    assert collection.status == NodeStatus.FAILED
    assert not Artifact.objects.filter(collection=collection, name=DCGM_ARTIFACT).exists()
