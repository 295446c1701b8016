"""Starting a snapshot, claiming node work, and surviving redelivery — without the lab."""

from datetime import timedelta

import pytest

from clusters.services import cluster_create
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.outcomes import Failed, FailureKind, NotClaimed, Retryable
from collectors.services import (
    SnapshotRefused,
    node_collection_fail_stale,
    node_collection_run,
)
from collectors.tasks import collect_node, snapshot_start
from incidents.models import EventKind
from incidents.services import incident_open

pytestmark = pytest.mark.django_db


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
    first = node_collection_run(collection_id=collection.pk, task_id="task-1")
    assert isinstance(first, Retryable) and first.attempt == 1
    assert first.failure.kind is FailureKind.UNREACHABLE
    collection.refresh_from_db()  # nothing stored; the claim kept for the retry
    assert (collection.status, collection.task_id) == (NodeStatus.RUNNING, "task-1")
    assert not Artifact.objects.filter(collection=collection).exists()
    second = node_collection_run(collection_id=collection.pk, task_id="task-1")
    assert isinstance(second, Failed) and second.failure.kind is FailureKind.UNREACHABLE
    assert not second.analysis_due  # gpu-1 is still pending
    collection.refresh_from_db()
    assert collection.status == NodeStatus.FAILED
    assert collection.attempts == 2
    assert collection.reason.startswith("unreachable")
    assert collection.finished_at is not None


def test_another_task_cannot_take_a_node_already_claimed(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-0")
    NodeCollection.objects.filter(pk=collection.pk).update(
        status=NodeStatus.RUNNING, task_id="owner"
    )
    assert node_collection_run(collection_id=collection.pk, task_id="intruder") == NotClaimed()
    collection.refresh_from_db()
    assert (collection.status, collection.attempts) == (NodeStatus.RUNNING, 0)


def test_a_redelivered_task_after_completion_stores_nothing_twice(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-1")
    NodeCollection.objects.filter(pk=collection.pk).update(attempts=1)  # skip the retry
    assert isinstance(node_collection_run(collection_id=collection.pk, task_id="t"), Failed)
    stored = Artifact.objects.filter(collection=collection).count()
    assert node_collection_run(collection_id=collection.pk, task_id="t") == NotClaimed()
    assert Artifact.objects.filter(collection=collection).count() == stored


def test_the_last_node_moves_the_snapshot_to_analysis_once(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    NodeCollection.objects.filter(snapshot=snapshot).update(attempts=1)
    outcomes = [
        node_collection_run(collection_id=collection.pk, task_id=f"t{collection.pk}")
        for collection in snapshot.collections.order_by("node_name")
    ]
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
    assert [o.analysis_due for o in outcomes] == [False, True]  # the analysis queued once
    assert {o.snapshot_id for o in outcomes} == {snapshot.pk}


def test_work_abandoned_by_a_lost_worker_is_failed_and_the_snapshot_finishes(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    swept = node_collection_fail_stale(older_than=timedelta(seconds=-1))
    assert (swept.failed, swept.analysis_due) == (2, (snapshot.pk,))
    assert node_collection_fail_stale(older_than=timedelta(seconds=-1)).failed == 0
    reasons = set(snapshot.collections.values_list("reason", flat=True))
    assert reasons == {"no worker finished this node in time (worker lost?)"}
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING


def test_the_node_task_retries_under_its_own_id_then_queues_the_analysis_once(
    incident, bob, django_capture_on_commit_callbacks
):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    NodeCollection.objects.filter(snapshot=snapshot, node_name="gpu-1").update(status=NodeStatus.OK)
    collection = snapshot.collections.get(node_name="gpu-0")
    with django_capture_on_commit_callbacks() as queued:
        # Eager: Celery's autoretry runs the retry at once, under the same task id.
        result = collect_node.apply(args=(collection.pk,), task_id="task-1")
    assert result.get() == "Failed"
    collection.refresh_from_db()
    assert (collection.status, collection.attempts) == (NodeStatus.FAILED, 2)
    assert collection.reason.startswith("unreachable: connection refused by 127.0.9.1:22")
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
    assert len(queued) == 1  # the analysis, once the finish is committed
