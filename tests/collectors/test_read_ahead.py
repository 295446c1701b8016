"""A large snapshot's final verdict made by the reader that read its parses as they arrived
(collectors/read_ahead.py): the same verdict as the analysis worker's from what is stored, with
a node stored again after it was read (its held parse no longer its record), with its record
gone, and with an earlier snapshot to compare with; the lease it holds is the only one, and a
reader that dies leaves the verdict to the final verdict task once its lease expires."""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from collectors import node_work, nodeparse, provisional, read_ahead, services, tasks
from collectors.models import NodeCollection, NodeParseRecord, NodeStatus, Snapshot, SnapshotStatus
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot, split_nodes

pytestmark = pytest.mark.django_db(transaction=True)


def _evidence(scenario: str, snap: str | None = None, at=None):
    evidence = split_nodes(load_snapshot(scenario, snap), ranks_per_node=1)
    if at is not None:
        for node in evidence.nodes:
            node.collected_at = at
        evidence.collected_at = at
    return evidence


def _store(snapshot: Snapshot, evidence) -> None:
    """Each node's evidence stored as a worker stores it (its parse included)."""
    by_name = {n.node: n for n in evidence.nodes}
    for collection in snapshot.collections.all():
        if collection.node_name in by_name:
            node_work.node_evidence_store(
                collection=collection, evidence=by_name[collection.node_name]
            )


def _collecting(incident, evidence, bob) -> Snapshot:
    """A snapshot whose nodes are all stored, still collecting (the reader's view of it)."""
    snapshot = services.snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)
    _store(snapshot, evidence)
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.RUNNING)
    return snapshot


def _last_node_in(snapshot: Snapshot) -> None:
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.ANALYSING)


_ReadAhead = services.ReadAhead


class _Nodes:
    """The reader's sleep: what happens between two of its looks, one step a look."""

    def __init__(self, *steps) -> None:
        self.steps, self.looks = list(steps), 0

    def __call__(self, seconds: float) -> None:
        self.looks += 1
        if self.steps:
            self.steps.pop(0)()


@pytest.fixture
def reads(monkeypatch):
    """How many stored parses were read back (decoded), all readers together."""
    seen: list[int] = []
    original = nodeparse._read

    def spy(pk, compressed):
        seen.append(pk)
        return original(pk, compressed)

    monkeypatch.setattr(nodeparse, "_read", spy)
    return seen


def _stored_diagnosis(snapshot: Snapshot) -> dict:
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    return snapshot.whole_diagnosis()


def test_the_readers_verdict_is_the_analysis_workers_and_reads_each_parse_once(cluster, bob, reads):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    expected, overview = services.snapshot_diagnosed(snapshot)  # from what is stored
    reads.clear()
    nodes = _Nodes(lambda: _last_node_in(snapshot))
    outcome = read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=nodes)
    assert outcome == "verdict"
    assert _stored_diagnosis(snapshot) == expected
    assert snapshot.rank_overview == overview
    assert expected["classification"] == "A" and expected["suspect_ranks"] == [3]
    assert sorted(reads) == sorted(snapshot.collections.values_list("pk", flat=True))
    # The lease released with the verdict stored.
    assert (snapshot.reader, snapshot.reader_until) == ("", None)


def test_what_the_reader_held_is_freed_apart_once_its_verdict_is_stored(cluster, bob, monkeypatch):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    seen = []
    original = read_ahead._free

    def spy(held):
        parses, spent, _ = held
        stored = spent[-1]  # the stored snapshot, the verdict's diagnosis on it
        seen.append((parses, spent, len(parses), stored.status, weakref.ref(stored)))
        del stored
        original(held)

    monkeypatch.setattr(read_ahead, "_free", spy)
    nodes = _Nodes(lambda: _last_node_in(snapshot))
    assert read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=nodes) == "verdict"
    assert read_ahead.freed(timeout=60)
    ((parses, spent, held, status, stored),) = seen
    assert held == snapshot.collections.count() and status == SnapshotStatus.DONE
    assert parses == {} and spent == []
    assert stored() is None  # the thread held the last reference: nothing outlives it


def test_the_first_verdict_is_the_readers_from_what_it_holds(cluster, bob, reads, monkeypatch):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    out = snapshot.collections.order_by("node_name").last()
    NodeCollection.objects.filter(pk=out.pk).update(status=NodeStatus.RUNNING)
    # The early worker's first verdict, from what is stored: what the reader's must be.
    expected = provisional.snapshot_provisional_analyse(snapshot_id=snapshot.pk)
    assert expected["missing"] == [out.node_name] and expected["nodes_in"] >= 1
    # Claimed again (95 % in) while a reader lives: the early worker's task leaves it.
    Snapshot.objects.filter(pk=snapshot.pk).update(provisional=provisional._DUE)
    assert read_ahead.lease_claim(snapshot.pk, "r" * 32)
    monkeypatch.setattr(tasks.analyse_provisional, "apply_async", lambda *a, **k: None)
    tasks.analyse_provisional(snapshot.pk)
    assert provisional.provisional_awaited(snapshot.pk)
    read_ahead.lease_release(snapshot.pk, "r" * 32)

    reads.clear()
    shown, held, spent = [], [], []
    monkeypatch.setattr(services, "ReadAhead", lambda: held.append(_ReadAhead()) or held[-1])
    nodes = _Nodes(
        lambda: (shown.append(Snapshot.objects.get(pk=snapshot.pk).provisional),
                 spent.append(len(held[0].spent))),
        lambda: (spent.append(len(held[0].spent)), _last_node_in(snapshot)),
    )  # fmt: skip
    assert read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=nodes) == "verdict"
    # What the first verdict was made of is held past its store, freed at the next look.
    assert spent[0] >= 3 and spent[1] == 0
    made = shown[0]
    assert {k: v for k, v in made.items() if k != "at"} == {
        k: v for k, v in expected.items() if k != "at"
    }
    # Each parse decoded once for both verdicts, the first and the final.
    assert sorted(reads) == sorted(snapshot.collections.values_list("pk", flat=True))
    assert _stored_diagnosis(snapshot)["classification"] == "A"


@pytest.mark.parametrize("again", ["every node", "one node", "a record gone"])
def test_a_node_stored_again_after_it_was_read_is_read_as_stored(cluster, bob, again):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    healthy, stalled = _evidence("healthy", "snap0"), _evidence("tp-rank-stall")
    snapshot = _collecting(incident, healthy, bob)
    read_first = services.snapshot_diagnosed(snapshot)[0]

    def store_again() -> None:
        if again == "every node":
            _store(snapshot, stalled)
        elif again == "one node":
            stalled.nodes = [n for n in stalled.nodes if n.node == "lab-node-3"]
            _store(snapshot, stalled)
        else:
            NodeParseRecord.objects.filter(
                collection__snapshot=snapshot, collection__node_name="lab-node-1"
            ).delete()
        _last_node_in(snapshot)

    nodes = _Nodes(store_again)
    assert read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=nodes) == "verdict"
    stored = _stored_diagnosis(snapshot)
    # What the analysis worker makes from what is stored now, without anything read ahead.
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.ANALYSING)
    assert stored == services.snapshot_diagnosed(Snapshot.objects.get(pk=snapshot.pk))[0]
    if again == "every node":
        assert read_first["classification"] == "healthy" and stored["classification"] == "A"


def test_the_snapshot_compared_with_is_merged_ahead_and_gives_the_same_verdict(
    cluster, bob, monkeypatch
):
    incident = incident_open(cluster=cluster, title="two looks", opened_by=bob)
    later = _evidence("tp-rank-stall")
    earlier = services.snapshot_store_bundle(
        incident=incident,
        evidence=_evidence("healthy", "snap0", at=later.collected_at - timedelta(minutes=2)),
        by=bob,
    )
    assert services.snapshot_analyse(snapshot_id=earlier.pk).status == SnapshotStatus.DONE
    snapshot = _collecting(incident, later, bob)
    expected = services.snapshot_diagnosed(snapshot)[0]
    merged, original = [], services.compared_of
    monkeypatch.setattr(services, "compared_of", lambda s: merged.append(s.pk) or original(s))
    nodes = _Nodes(lambda: _last_node_in(snapshot))
    assert read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=nodes) == "verdict"
    assert _stored_diagnosis(snapshot) == expected
    assert merged == [earlier.pk]  # while the nodes came in, not again after the last one


def test_one_reader_at_a_time_and_only_while_collecting(cluster, bob):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("healthy", "snap0"), bob)
    assert read_ahead.lease_claim(snapshot.pk, "a" * 32)
    assert not read_ahead.lease_claim(snapshot.pk, "b" * 32)  # a live one holds it
    assert read_ahead.parses_read_ahead(snapshot_id=snapshot.pk) == "not claimed"
    read_ahead.lease_release(snapshot.pk, "a" * 32)
    _last_node_in(snapshot)
    assert not read_ahead.lease_claim(snapshot.pk, "b" * 32)  # its last node is in


def test_a_dead_readers_verdict_is_made_by_the_final_task_once_its_lease_expires(cluster, bob):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    # A reader killed mid-read: its lease stays, renewed no more.
    assert read_ahead.lease_claim(snapshot.pk, "d" * 32)
    _last_node_in(snapshot)
    assert read_ahead.final_turn(snapshot.pk) == "reader"
    Snapshot.objects.filter(pk=snapshot.pk).update(
        reader_until=timezone.now() - timedelta(seconds=0.1)
    )
    assert read_ahead.final_turn(snapshot.pk) == "mine"
    tasks.analyse_snapshot(snapshot.pk)  # the task's body, here
    assert _stored_diagnosis(snapshot)["classification"] == "A"
    assert read_ahead.final_turn(snapshot.pk) == "done"


def test_a_reader_that_fails_releases_its_lease_at_once(cluster, bob):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("healthy", "snap0"), bob)

    def fails() -> None:
        _last_node_in(snapshot)
        raise RuntimeError("the reader's process breaks")

    with pytest.raises(RuntimeError):
        read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=_Nodes(fails))
    assert read_ahead.final_turn(snapshot.pk) == "mine"


def test_a_reader_whose_lease_is_taken_hands_over(cluster, bob, monkeypatch):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("healthy", "snap0"), bob)
    monkeypatch.setattr(read_ahead, "RENEW_S", 0.05)

    def taken(seconds: float) -> None:
        Snapshot.objects.filter(pk=snapshot.pk).update(reader="x" * 32)
        time.sleep(0.3)  # the lease's thread sees it at its next renewal

    outcome = read_ahead.parses_read_ahead(snapshot_id=snapshot.pk, sleep=taken)
    assert outcome == "handed over"
    assert Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.RUNNING


def test_a_reader_reads_for_so_long_then_a_new_one_follows(cluster, bob):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("healthy", "snap0"), bob)
    clock = itertools.count(0.0, 3.0).__next__  # seconds pass as it reads
    outcome = read_ahead.parses_read_ahead(
        snapshot_id=snapshot.pk, read_for_s=10.0, clock=clock, sleep=lambda s: None
    )
    assert outcome == "read long enough"
    assert read_ahead.final_turn(snapshot.pk) == "done"  # still collecting, and free to claim
    assert read_ahead.lease_claim(snapshot.pk, "n" * 32)


def test_a_reader_that_dies_before_the_first_verdict_leaves_it_to_the_early_worker(
    cluster, bob, monkeypatch
):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    out = snapshot.collections.order_by("node_name").last()
    NodeCollection.objects.filter(pk=out.pk).update(status=NodeStatus.RUNNING)
    expected = provisional.snapshot_provisional_analyse(snapshot_id=snapshot.pk)
    looks: list[tuple] = []
    monkeypatch.setattr(
        tasks.analyse_provisional, "apply_async", lambda args, countdown: looks.append(args)
    )
    # Claimed (95 % in) while a reader lives: left to it, looked at again after a lease.
    Snapshot.objects.filter(pk=snapshot.pk).update(provisional=provisional._DUE)
    assert read_ahead.lease_claim(snapshot.pk, "r" * 32)
    tasks.analyse_provisional(snapshot.pk)
    assert looks == [(snapshot.pk,)] and provisional.provisional_awaited(snapshot.pk)
    # The reader killed before it made it: its lease runs out, unreleased.
    Snapshot.objects.filter(pk=snapshot.pk).update(reader_until=timezone.now())
    tasks.analyse_provisional(*looks.pop())
    snapshot.refresh_from_db()
    assert {k: v for k, v in snapshot.provisional.items() if k != "at"} == {
        k: v for k, v in expected.items() if k != "at"
    }
    assert looks == []  # made: no more looks


def test_only_large_snapshots_are_read_ahead(settings):
    settings.HANGDESK_READ_AHEAD_NODES = 1000
    assert not read_ahead.worth_reading_ahead(999)
    assert read_ahead.worth_reading_ahead(1000)
    settings.HANGDESK_READ_AHEAD_NODES = 0
    assert not read_ahead.worth_reading_ahead(100_000)


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="NOTIFY is PostgreSQL's: on SQLite the look every LOOK_S decides (the tests above)",
)
def test_the_reader_is_woken_by_the_last_nodes_store_not_its_next_look(cluster, bob, monkeypatch):
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = _collecting(incident, _evidence("tp-rank-stall"), bob)
    expected = services.snapshot_diagnosed(snapshot)[0]
    last = snapshot.collections.order_by("node_name").last()
    NodeCollection.objects.filter(pk=last.pk).update(status=NodeStatus.RUNNING)
    # Its next look a minute away: only the notice can make the verdict sooner.
    monkeypatch.setattr(read_ahead, "LOOK_S", 60.0)
    outcome: list[str] = []

    def reader() -> None:
        try:
            outcome.append(read_ahead.parses_read_ahead(snapshot_id=snapshot.pk))
        finally:
            connection.close()

    thread = threading.Thread(target=reader)
    thread.start()
    channel = node_work.last_node_channel(snapshot.pk)
    _wait_for(lambda: _listening(channel), "the reader's LISTEN")
    NodeCollection.objects.filter(pk=last.pk).update(status=NodeStatus.OK)
    stored_at = time.monotonic()
    assert node_work.snapshot_finish_if_complete(snapshot_id=snapshot.pk)
    thread.join(timeout=120)
    assert outcome == ["verdict"]
    # Well inside the minute its look would have taken, even on a loaded machine.
    assert time.monotonic() - stored_at < 30
    assert _stored_diagnosis(snapshot) == expected
    assert not _listening(channel)  # its connection closed with the reader


def _listening(channel: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND state = 'idle' AND query = %s",
            [f'LISTEN "{channel}"'],
        )
        return cursor.fetchone()[0] > 0


def _wait_for(condition, what: str, timeout_s: float = 60.0) -> None:
    until = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < until, f"no {what} within {timeout_s} s"
        time.sleep(0.05)
