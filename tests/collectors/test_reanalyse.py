"""`manage.py diagnose SNAPSHOT_ID --reanalyse`: an old stored verdict read as it was, and the
same stored evidence analysed again by today's engine, printed beside it, nothing stored."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from analysis.evidence import stopped_short
from collectors.models import Snapshot
from collectors.services import snapshot_store_bundle
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db
OLD_ROW = Path(__file__).parents[1] / "analysis" / "stored" / "schema2-partial.json"


def _diagnose(*args) -> dict:
    out = StringIO()
    call_command("diagnose", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_an_old_verdict_is_read_as_stored_and_reanalysed_on_request(cluster, bob):
    # The stored row is what schema 2 concluded on this evidence: a node whose evidence
    # stopped short read as unreachable, so a B hang was called A (the bug issue 17 fixed).
    evidence = load_snapshot("mismatch")
    evidence.nodes[0].status = stopped_short("output cut at 300000 bytes")
    incident = incident_open(cluster=cluster, title="old row", opened_by=bob)
    snapshot = snapshot_store_bundle(incident=incident, by=bob, evidence=evidence)
    old = json.loads(OLD_ROW.read_text())
    Snapshot.objects.filter(pk=snapshot.pk).update(status="done", diagnosis=old)

    stored = _diagnose(str(snapshot.pk))
    assert (stored["classification"], stored["rule"]) == ("A", "unreachable")
    assert stored["schema_version"] == 3  # upgraded on read

    again = _diagnose(str(snapshot.pk), "--reanalyse")
    assert again["classification"] == "B" and again["rule"] != "unreachable"
    assert again["suspect_ranks"] == [0]
    assert Snapshot.objects.get(pk=snapshot.pk).whole_diagnosis() == old  # nothing stored
