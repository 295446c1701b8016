"""Migration 0007: the status text older rows kept in a node's `reason` becomes the note of its
evidence status, and the analysis reads the same status from either."""

import importlib

import pytest
from django.apps import apps

from analysis.evidence import GATHERED, not_gathered, stopped_short
from collectors.models import NodeCollection, Snapshot
from incidents.services import incident_open

pytestmark = pytest.mark.django_db
migration = importlib.import_module("collectors.migrations.0007_node_reason_is_the_note")

OLD_ROWS = {  # node -> (status, reason) as rows were stored before the typed status
    "whole": ("ok", "ok"),
    "cut": ("ok", "partial: output cut at 300000 bytes"),
    "lost": ("failed", "unreachable: timed out after 10s"),
}


def test_old_status_texts_become_notes_and_read_as_the_same_status(cluster, bob):
    incident = incident_open(cluster=cluster, title="old rows", opened_by=bob)
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, status="done")
    for name, (status, reason) in OLD_ROWS.items():
        NodeCollection.objects.create(
            snapshot=snapshot, node_name=name, address="a", status=status, reason=reason
        )
    migration.reason_to_note(apps, None)
    read = {c.node_name: c for c in NodeCollection.objects.filter(snapshot=snapshot)}
    assert {name: c.reason for name, c in read.items()} == {
        "whole": "",
        "cut": "output cut at 300000 bytes",
        "lost": "unreachable: timed out after 10s",
    }
    assert read["whole"].evidence_status == GATHERED
    assert read["cut"].evidence_status == stopped_short("output cut at 300000 bytes")
    assert read["lost"].evidence_status == not_gathered("unreachable: timed out after 10s")
    migration.note_to_reason(apps, None)
    back = NodeCollection.objects.filter(snapshot=snapshot).values_list("node_name", "reason")
    assert dict(back) == {name: reason for name, (_, reason) in OLD_ROWS.items()}
