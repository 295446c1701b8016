"""The management commands an SRE scripts: tokens, bundles in and out, stored diagnoses."""

import json

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from collectors.models import Snapshot
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def analysed(bob, cluster, django_capture_on_commit_callbacks):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("mismatch"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    return incident, Snapshot.objects.get(pk=snapshot.pk)


def test_api_token_prints_a_token_that_works_once_shown(bob, capsys):
    call_command("api_token", "bob", "--name", "ci")
    secret = capsys.readouterr().out.strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/incidents/").status_code == 200
    with pytest.raises(CommandError, match="No active user named nobody"):
        call_command("api_token", "nobody")


def test_diagnose_prints_a_stored_snapshots_diagnosis(analysed, capsys):
    _, snapshot = analysed
    call_command("diagnose", str(snapshot.pk), "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed == snapshot.whole_diagnosis()
    # what a person reads first comes first, whatever order the database keeps
    assert list(printed)[:3] == ["classification", "summary", "suspect_ranks_compact"]
    call_command("diagnose", str(snapshot.pk))
    assert capsys.readouterr().out.startswith("B: ")
    with pytest.raises(CommandError, match="either SNAPSHOT_ID or --bundle"):
        call_command("diagnose")


def test_bundle_export_then_import_keeps_the_evidence(
    analysed, tmp_path, capsys, django_capture_on_commit_callbacks
):
    incident, snapshot = analysed
    path = tmp_path / "out.tar.gz"
    call_command("bundle", "export", str(snapshot.pk), str(path))
    assert f"wrote {path}" in capsys.readouterr().out
    with django_capture_on_commit_callbacks():
        call_command("bundle", "import", str(incident.pk), str(path))
    imported = Snapshot.objects.exclude(pk=snapshot.pk).get()
    snapshot_analyse(snapshot_id=imported.pk)
    imported.refresh_from_db()
    assert imported.whole_diagnosis() == snapshot.whole_diagnosis()
    (tmp_path / "evil.tar.gz").write_bytes(b"not a tar")
    with pytest.raises(CommandError, match="bundle refused"):
        call_command("bundle", "import", str(incident.pk), str(tmp_path / "evil.tar.gz"))
