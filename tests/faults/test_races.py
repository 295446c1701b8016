"""Two responders clicking at once, on the real PostgreSQL (each thread its own connection).

Must hold: exactly one click wins, the other is told the incident changed meanwhile; one
timeline event, not two; of two "snapshot" clicks, one snapshot with one visit per node.
(Status moves are conditional updates, docs/architecture.md; a second running snapshot is
refused by a partial unique index. The single-thread versions live in tests/incidents and
tests/snapshots/test_snapshot_service.py.)"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from collectors.models import NodeCollection, Snapshot
from collectors.services import snapshot_create
from incidents.models import EventKind, Incident, TimelineEvent
from incidents.services import InvalidTransition, incident_change_status, incident_open

pytestmark = pytest.mark.django_db(transaction=True)


def _at_once(work, count: int = 2) -> list:
    """Run work(i) in `count` threads released together; their results or exceptions."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work(index)
        except Exception as exc:  # what the losing click gets
            results[index] = exc
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.parametrize("round_", range(5))  # a race: tried a few times
def test_two_status_clicks_one_wins_one_is_told(bob, alice, cluster, round_):
    incident = incident_open(opened_by=bob, title="t", cluster=cluster)
    people = [bob, alice]

    def click(i):
        mine = Incident.objects.get(pk=incident.pk)  # each loaded the page before the other
        return incident_change_status(incident=mine, to_status="investigating", by=people[i])

    results = _at_once(click)
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 1, results
    assert isinstance(errors[0], InvalidTransition)
    assert "changed meanwhile" in str(errors[0]) or "cannot move" in str(errors[0])
    assert Incident.objects.get(pk=incident.pk).status == "investigating"
    moves = TimelineEvent.objects.filter(incident=incident, kind=EventKind.STATUS)
    assert moves.count() == 1


@pytest.mark.parametrize("round_", range(5))
def test_two_snapshot_clicks_start_one_snapshot(bob, alice, cluster, round_):
    incident = incident_open(opened_by=bob, title="t", cluster=cluster)
    people = [bob, alice]
    results = _at_once(lambda i: snapshot_create(incident=incident, by=people[i]))
    assert not any(isinstance(r, Exception) for r in results), results
    assert sorted(r.created for r in results) == [False, True]
    assert results[0].snapshot.pk == results[1].snapshot.pk
    assert Snapshot.objects.filter(incident=incident).count() == 1
    assert NodeCollection.objects.filter(snapshot__incident=incident).count() == 2
