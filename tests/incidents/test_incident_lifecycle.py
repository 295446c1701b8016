"""An incident moves open -> investigating -> mitigated -> resolved -> closed, and says so."""

import itertools

import pytest

from incidents.models import EventKind, Incident, Status
from incidents.services import (
    InvalidTransition,
    incident_add_note,
    incident_change_status,
    incident_open,
    incident_update,
)

pytestmark = pytest.mark.django_db


def _open(bob, cluster) -> Incident:
    return incident_open(
        opened_by=bob, title="run 12 stuck at step 14200", cluster=cluster, severity="SEV2"
    )


def test_it_records_who_opened_the_incident(bob, cluster):
    incident = _open(bob, cluster)
    (event,) = incident.events.all()
    assert event.kind == EventKind.OPENED
    assert event.author == bob
    assert event.details["cluster"] == "gpt-train"
    assert incident.status == Status.OPEN


def test_each_status_change_is_timestamped_and_attributed(bob, alice, cluster):
    incident = _open(bob, cluster)
    path = [Status.INVESTIGATING, Status.MITIGATED, Status.RESOLVED, Status.CLOSED]
    for step, who in zip(path, [bob, bob, alice, alice], strict=True):
        incident_change_status(incident=incident, to_status=step, by=who, note=f"now {step}")
    incident.refresh_from_db()
    assert incident.status == Status.CLOSED
    moves = list(incident.events.filter(kind=EventKind.STATUS).order_by("at", "pk"))
    assert [(e.details["from"], e.details["to"]) for e in moves] == [
        ("open", "investigating"),
        ("investigating", "mitigated"),
        ("mitigated", "resolved"),
        ("resolved", "closed"),
    ]
    assert [e.author for e in moves] == [bob, bob, alice, alice]
    assert all(earlier.at <= later.at for earlier, later in itertools.pairwise(moves))
    assert incident.status_changed_at == moves[-1].at


def test_it_refuses_a_jump_that_is_not_a_transition(bob, cluster):
    incident = _open(bob, cluster)
    with pytest.raises(InvalidTransition, match="cannot move to closed"):
        incident_change_status(incident=incident, to_status=Status.CLOSED, by=bob)
    assert incident.events.count() == 1


def test_a_closed_incident_stays_closed(bob, cluster):
    incident = _open(bob, cluster)
    for step in [Status.RESOLVED, Status.CLOSED]:
        incident_change_status(incident=incident, to_status=step, by=bob)
    with pytest.raises(InvalidTransition):
        incident_change_status(incident=incident, to_status=Status.INVESTIGATING, by=bob)


def test_of_two_simultaneous_moves_only_one_wins(bob, alice, cluster):
    incident = _open(bob, cluster)
    stale_copy = Incident.objects.get(pk=incident.pk)
    incident_change_status(incident=incident, to_status=Status.INVESTIGATING, by=bob)
    with pytest.raises(InvalidTransition, match="changed meanwhile"):
        incident_change_status(incident=stale_copy, to_status=Status.INVESTIGATING, by=alice)
    assert incident.events.filter(kind=EventKind.STATUS).count() == 1


def test_it_can_reopen_a_resolved_incident_into_investigation(bob, cluster):
    incident = _open(bob, cluster)
    incident_change_status(incident=incident, to_status=Status.RESOLVED, by=bob)
    incident_change_status(incident=incident, to_status=Status.INVESTIGATING, by=bob)
    assert incident.status == Status.INVESTIGATING


def test_notes_land_on_the_timeline_and_can_be_pinned(bob, cluster):
    incident = _open(bob, cluster)
    note = incident_add_note(
        incident=incident, by=bob, text="rank 7 log stops at 03:12", pinned=True
    )
    assert note.kind == EventKind.NOTE and note.pinned
    assert incident.events.filter(pinned=True).get() == note


def test_an_edit_records_what_changed(bob, alice, cluster):
    incident = _open(bob, cluster)
    incident_update(
        incident=incident, by=bob, severity="SEV1", commander=alice, title=incident.title
    )
    edit = incident.events.get(kind=EventKind.EDIT)
    assert edit.details == {
        "severity": {"from": "SEV2", "to": "SEV1"},
        "commander": {"from": None, "to": "alice"},
    }
    assert "SEV2 → SEV1" in edit.summary


def test_an_edit_that_changes_nothing_writes_nothing(bob, cluster):
    incident = _open(bob, cluster)
    incident_update(incident=incident, by=bob, severity="SEV2")
    assert incident.events.count() == 1
