"""A later snapshot is compared with the earlier one without reading the earlier one's
flight-recorder dumps (collectors/services.py, `compared_snapshot`; here a bundle's, its
nodes parsed from their artifacts): the analysis reads none of a previous snapshot's, and at
32,000 ranks they are most of its stored bytes. The verdict is the one the whole earlier
evidence gives."""

import pytest

import analysis
from collectors import nodeparse, selectors
from collectors.models import Artifact, Snapshot
from collectors.services import compared_snapshot, snapshot_analyse
from collectors.starts import snapshot_import_bundle
from hangdesk.masking import masked_diagnosis
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(bob, cluster):
    return incident_open(opened_by=bob, title="slow or dead", cluster=cluster)


def _imported(incident, evidence, capture) -> Snapshot:
    with capture():
        return snapshot_import_bundle(incident=incident, evidence=evidence)


def _earlier_with_dumps():
    earlier = load_snapshot("straggler", "snap0")
    dumps = load_snapshot("outside").nodes[0].flight_recorder
    assert dumps
    earlier.nodes[0].flight_recorder = dict(dumps)
    return earlier


def test_the_earlier_snapshots_dumps_are_not_read_and_the_verdict_is_the_same(
    incident, django_capture_on_commit_callbacks, monkeypatch
):
    earlier = _imported(incident, _earlier_with_dumps(), django_capture_on_commit_callbacks)
    snapshot_analyse(snapshot_id=earlier.pk)
    assert Artifact.objects.filter(
        collection__snapshot=earlier, name__startswith="flight_recorder/"
    ).exists()
    later = _imported(
        incident, load_snapshot("straggler", "snap1"), django_capture_on_commit_callbacks
    )
    read = []
    original = nodeparse._evidence

    def spy(snapshot, pks, dumps=True):
        got = original(snapshot, pks, dumps)
        read.extend(got.values())
        return got

    monkeypatch.setattr(nodeparse, "_evidence", spy)
    compared = compared_snapshot(later)
    whole = selectors.snapshot_evidence(earlier)
    assert [n.node for n in read] == [n.node for n in whole.nodes]
    assert all(not n.flight_recorder for n in read)
    assert any(n.flight_recorder for n in whole.nodes)
    for field in ("environ", "pyspy", "logs", "ps"):
        assert getattr(read[0], field) == getattr(whole.nodes[0], field)
    assert compared.dumps == [] and compared.ranks
    monkeypatch.undo()

    expected = masked_diagnosis(
        analysis.diagnose(selectors.snapshot_evidence(later), previous=whole)
    )
    done = snapshot_analyse(snapshot_id=later.pk)
    assert done.diagnosis == expected
    assert done.diagnosis["progress"]["method"] == "two_snapshots"


def test_no_previous_snapshot_no_comparison(incident, django_capture_on_commit_callbacks):
    only = _imported(incident, load_snapshot("outside"), django_capture_on_commit_callbacks)
    assert compared_snapshot(only) is None
