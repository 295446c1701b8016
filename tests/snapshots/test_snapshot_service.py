"""Starting a snapshot, claiming node work, and surviving redelivery — without the lab."""

from datetime import timedelta

import pytest

from collectors import remote
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.services import (
    SnapshotRefused,
    node_collection_fail_stale,
    node_collection_run,
    snapshot_start,
)
from incidents.models import EventKind
from incidents.services import cluster_create, incident_open

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
    with pytest.raises(remote.TransientCollectionError):
        node_collection_run(collection_id=collection.pk, task_id="task-1")
    assert node_collection_run(collection_id=collection.pk, task_id="task-1") == NodeStatus.FAILED
    collection.refresh_from_db()
    assert collection.attempts == 2
    assert collection.reason.startswith("unreachable")
    assert collection.finished_at is not None


def test_another_task_cannot_take_a_node_already_claimed(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-0")
    NodeCollection.objects.filter(pk=collection.pk).update(
        status=NodeStatus.RUNNING, task_id="owner"
    )
    assert node_collection_run(collection_id=collection.pk, task_id="intruder") is None
    collection.refresh_from_db()
    assert (collection.status, collection.attempts) == (NodeStatus.RUNNING, 0)


def test_a_redelivered_task_after_completion_stores_nothing_twice(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    collection = snapshot.collections.get(node_name="gpu-1")
    NodeCollection.objects.filter(pk=collection.pk).update(attempts=1)  # skip the retry
    assert node_collection_run(collection_id=collection.pk, task_id="t") == NodeStatus.FAILED
    stored = Artifact.objects.filter(collection=collection).count()
    assert node_collection_run(collection_id=collection.pk, task_id="t") is None
    assert Artifact.objects.filter(collection=collection).count() == stored


def test_the_last_node_moves_the_snapshot_to_analysis_once(
    incident, bob, django_capture_on_commit_callbacks
):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    NodeCollection.objects.filter(snapshot=snapshot).update(attempts=1)
    with django_capture_on_commit_callbacks() as queued:
        for collection in snapshot.collections.all():
            node_collection_run(collection_id=collection.pk, task_id=f"t{collection.pk}")
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
    assert len(queued) == 1


def test_work_abandoned_by_a_lost_worker_is_failed_and_the_snapshot_finishes(incident, bob):
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    assert node_collection_fail_stale(older_than=timedelta(seconds=-1)) == 2
    reasons = set(snapshot.collections.values_list("reason", flat=True))
    assert reasons == {"no worker finished this node in time (worker lost?)"}
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING
