"""The first verdict's deadline tracks the snapshot's own visits (collectors/provisional.py):
the nodes still out are the slowest when every visit has started and each one out has taken
SLOW_FACTOR times the median visit of those in (at least SLOW_FLOOR_S), never a fixed time
from the click: a loaded controller whose nodes are still queued gets no first verdict from
a third of its fleet. And the provisional verdict stored is the masked diagnosis's head,
made without the whole per-rank table."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

import analysis
from clusters.services import node_create
from collectors import provisional, services
from collectors.bundles import read_bundle
from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.provisional import SLOW_FACTOR, SLOW_FLOOR_S
from hangdesk.masking import masked_diagnosis
from incidents.services import incident_open
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db

NODES = 30
HF = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
NOW = timezone.now()


@pytest.fixture
def snapshot(cluster, bob) -> Snapshot:
    for index in range(2, NODES):
        node_create(
            cluster=cluster, name=f"gpu-{index:02d}", address=f"127.0.9.{index + 1}", port=22,
            username="root", key_path="/etc/hangdesk/id_ed25519", host_key=HOST_KEY,
        )  # fmt: skip
    incident = incident_open(cluster=cluster, title="thirty", opened_by=bob)
    created = services.snapshot_create(incident=incident, by=bob)
    assert created.snapshot.collections.count() == NODES
    return created.snapshot


def _visits(snapshot, *, done: int, visit_s: float, running_for: list[float]) -> None:
    """`done` nodes in after visits of `visit_s`, then one visit still out per `running_for`
    (seconds since it started); the rest pending (never started)."""
    names = list(snapshot.collections.order_by("node_name").values_list("pk", flat=True))
    for pk in names[:done]:
        started = NOW - timedelta(seconds=200)
        NodeCollection.objects.filter(pk=pk).update(
            status=NodeStatus.OK,
            started_at=started,
            finished_at=started + timedelta(seconds=visit_s),
        )
    for pk, seconds in zip(names[done:], running_for, strict=False):
        NodeCollection.objects.filter(pk=pk).update(
            status=NodeStatus.RUNNING, started_at=NOW - timedelta(seconds=seconds)
        )


def test_nodes_still_queued_are_not_slow_however_long_since_the_click(snapshot):
    # A loaded controller ten minutes in: 10 of 30 in, 4 in flight for long, 16 never started.
    _visits(snapshot, done=10, visit_s=2.0, running_for=[600.0] * 4)
    later = NOW + timedelta(minutes=10)
    deadline = provisional.provisional_past_deadline(snapshot_id=snapshot.pk, now=later)
    assert not deadline.due
    assert deadline.recheck_s == SLOW_FLOOR_S  # 3 x 2 s is under the floor
    assert Snapshot.objects.get(pk=snapshot.pk).provisional is None  # not claimed


def test_every_visit_started_the_slowest_are_past_k_times_the_median_visit(snapshot):
    # 20 s visits (a loaded controller): the deadline is 60 s, not the floor.
    _visits(snapshot, done=NODES - 2, visit_s=20.0, running_for=[90.0, 45.0])
    deadline = provisional.slow_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert not deadline.due  # the newest visit still out is 45 s in: 15 s to go
    assert deadline.recheck_s == pytest.approx(SLOW_FACTOR * 20.0 - 45.0, abs=0.01)
    at = NOW + timedelta(seconds=deadline.recheck_s)
    assert provisional.slow_deadline(snapshot_id=snapshot.pk, now=at).due


def test_the_floor_keeps_fast_visits_from_calling_a_short_wait_slow(snapshot):
    _visits(snapshot, done=NODES - 1, visit_s=0.5, running_for=[4.0])
    deadline = provisional.slow_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert not deadline.due and deadline.recheck_s == pytest.approx(SLOW_FLOOR_S - 4.0, abs=0.01)
    later = NOW + timedelta(seconds=SLOW_FLOOR_S)
    assert provisional.slow_deadline(snapshot_id=snapshot.pk, now=later).due


def test_the_median_is_of_the_visits_in_failed_ones_too(snapshot):
    # 14 nodes in after 1 s, 15 failed after 30 s, one still out for 80 s: the median visit
    # is 30 s (the 15th of 29), the deadline 90 s.
    _visits(snapshot, done=NODES - 1, visit_s=1.0, running_for=[80.0])
    slow = list(snapshot.collections.filter(status=NodeStatus.OK).values_list("pk", flat=True))
    started = NOW - timedelta(seconds=200)
    NodeCollection.objects.filter(pk__in=slow[:15]).update(
        status=NodeStatus.FAILED, finished_at=started + timedelta(seconds=30)
    )
    assert not provisional.slow_deadline(snapshot_id=snapshot.pk, now=NOW).due
    later = NOW + timedelta(seconds=10.5)
    assert provisional.slow_deadline(snapshot_id=snapshot.pk, now=later).due


def test_past_the_deadline_the_first_verdict_is_claimed_once(snapshot):
    _visits(snapshot, done=NODES - 1, visit_s=2.0, running_for=[120.0])
    first = provisional.provisional_past_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert first.due and first
    assert Snapshot.objects.get(pk=snapshot.pk).provisional == {"state": "due"}
    again = provisional.provisional_past_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert not again and again.recheck_s is None  # the chain of checks ends


def test_nothing_to_wait_for_when_every_node_is_in_or_the_snapshot_is_done(snapshot):
    _visits(snapshot, done=NODES, visit_s=2.0, running_for=[])
    assert provisional.slow_deadline(snapshot_id=snapshot.pk, now=NOW) == (
        provisional.Deadline(False, None)
    )
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DONE)
    deadline = provisional.provisional_past_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert not deadline.due and deadline.recheck_s is None


def test_no_node_in_yet_is_checked_again_after_the_floor(snapshot):
    _visits(snapshot, done=0, visit_s=0.0, running_for=[300.0] * NODES)
    deadline = provisional.slow_deadline(snapshot_id=snapshot.pk, now=NOW)
    assert not deadline.due and deadline.recheck_s == SLOW_FLOOR_S


CORPUS = Path(__file__).parents[1] / "analysis" / "corpus"


@pytest.mark.parametrize("case", sorted(p.name for p in CORPUS.iterdir() if p.is_dir()))
def test_the_provisional_verdict_is_the_masked_diagnosis_head(case):
    diagnosis = analysis.diagnose(read_bundle(CORPUS / case))
    planted = dataclasses.replace(diagnosis, summary=f"{diagnosis.summary} --token={HF}")
    for one in (diagnosis, planted):
        whole = masked_diagnosis(one)
        assert provisional.masked_verdict(one) == {k: whole[k] for k in provisional.VERDICT_KEYS}
    assert HF not in str(provisional.masked_verdict(planted))
