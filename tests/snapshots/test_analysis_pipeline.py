"""Evidence in, verdict out: imported bundles are analysed, stored, and round-trip unchanged."""

import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from collectors.bundles import write_bundle
from collectors.models import Snapshot, SnapshotStatus
from collectors.selectors import snapshot_bundle
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from core.services import api_token_create
from incidents.models import EventKind
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(bob, cluster):
    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


def _import(incident, evidence, capture, by=None) -> Snapshot:
    with capture() as queued:
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence, by=by)
    assert len(queued) == 1  # the analysis task; run here as the worker would run it
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot


def test_an_imported_mismatch_is_analysed_as_B_and_stored(
    incident, bob, django_capture_on_commit_callbacks
):
    snapshot = _import(incident, load_snapshot("mismatch"), django_capture_on_commit_callbacks, bob)
    assert snapshot.status == SnapshotStatus.DONE
    assert snapshot.diagnosis["classification"] == "B"
    assert snapshot.diagnosis["suspect_ranks"] == [0]
    assert [row["rank"] for row in snapshot.whole_diagnosis()["per_rank"]] == [0, 1, 2, 3]
    finished = incident.events.filter(kind=EventKind.SNAPSHOT).order_by("at", "pk").last()
    assert finished.details["classification"] == "B"
    assert finished.summary.startswith(f"Snapshot {snapshot.pk} finished: 1 nodes ok, 0 failed")


def test_export_then_import_gives_the_same_diagnosis(
    incident, bob, cluster, django_capture_on_commit_callbacks
):
    first = _import(incident, load_snapshot("outside"), django_capture_on_commit_callbacks)
    other = incident_open(opened_by=bob, title="copy", cluster=cluster, severity="SEV2")
    from collectors.bundles import read_bundle_bytes

    again = _import(
        other, read_bundle_bytes(snapshot_bundle(first)), django_capture_on_commit_callbacks
    )
    assert first.diagnosis["classification"] == "A"
    assert again.whole_diagnosis() == first.whole_diagnosis()


def test_the_diagnose_command_reads_a_bundle_offline(tmp_path, capsys):
    path = tmp_path / "mismatch.tar.gz"
    path.write_bytes(write_bundle(load_snapshot("mismatch")))
    call_command("diagnose", "--bundle", str(path), "--json")
    diagnosis = json.loads(capsys.readouterr().out)
    assert diagnosis["classification"] == "B"
    assert diagnosis["world_size"] == 4


def test_a_logs_only_bundle_gives_a_rank_timeline_and_calls_absent_ranks_unobserved(
    tmp_path, capsys
):
    # As `kubectl logs` of every pod would give: one directory per pod, only log files.
    evidence = load_snapshot("outside")
    for pod, (name, text) in enumerate(sorted(evidence.nodes[0].logs.items())):
        if "rank2" in name:
            continue  # that pod's log was not gathered: nothing says the rank left
        (tmp_path / f"pod-{pod}" / "logs").mkdir(parents=True)
        (tmp_path / f"pod-{pod}" / "logs" / name.rsplit("/", 1)[-1]).write_text(text)
    (tmp_path / "manifest.json").write_text('{"world_size": 4}')
    call_command("diagnose", "--bundle", str(tmp_path), "--json")
    diagnosis = json.loads(capsys.readouterr().out)
    assert diagnosis["missing_ranks"] == []
    assert diagnosis["unobserved_ranks"] == [2]
    assert 2 not in diagnosis["suspect_ranks"]
    assert diagnosis["last_completed_step"] is not None
    assert len(diagnosis["per_rank"]) == 4


def test_the_api_imports_a_bundle_and_refuses_a_hostile_one(incident, bob, tmp_path):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    good = tmp_path / "good.tar.gz"
    good.write_bytes(write_bundle(load_snapshot("mismatch")))
    with good.open("rb") as handle:
        response = client.post(
            f"/api/v1/incidents/{incident.pk}/bundles/", {"bundle": handle}, format="multipart"
        )
    assert response.status_code == 201, response.content
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    with bad.open("rb") as handle:
        refused = client.post(
            f"/api/v1/incidents/{incident.pk}/bundles/", {"bundle": handle}, format="multipart"
        )
    assert refused.status_code == 400
    assert "not a readable tar archive" in refused.json()["bundle"]
    assert Snapshot.objects.count() == 1


def test_a_snapshot_downloads_as_a_bundle_from_the_page_and_the_api(
    incident, bob, as_user, django_capture_on_commit_callbacks
):
    from collectors.bundles import read_bundle_bytes

    snapshot = _import(incident, load_snapshot("mismatch"), django_capture_on_commit_callbacks)
    page = as_user(bob).get(f"/snapshots/{snapshot.pk}/bundle/")
    assert page["Content-Disposition"] == (
        f'attachment; filename="INC-{incident.pk}-snapshot-{snapshot.pk}.tar.gz"'
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    api = client.get(f"/api/v1/snapshots/{snapshot.pk}/bundle/")
    assert api.status_code == 200
    for body in (page.content, api.content):
        assert (
            read_bundle_bytes(body).nodes[0].environ == load_snapshot("mismatch").nodes[0].environ
        )


def test_a_later_snapshot_is_compared_with_the_earlier_one_to_tell_slow_from_dead(
    incident, django_capture_on_commit_callbacks
):
    earlier_evidence = load_snapshot("straggler", "snap0")
    later_evidence = load_snapshot("straggler", "snap1")
    earlier = _import(incident, earlier_evidence, django_capture_on_commit_callbacks)
    later = _import(incident, later_evidence, django_capture_on_commit_callbacks)
    assert later.diagnosis["progress"]["method"] == "two_snapshots"
    assert later.diagnosis["classification"] == "straggler"
    again = _import(
        incident, load_snapshot("straggler", "snap1"), django_capture_on_commit_callbacks
    )
    assert again.diagnosis["progress"]["method"] == "two_snapshots"  # compared with `earlier`
    from collectors.selectors import previous_snapshot

    assert previous_snapshot(again) == earlier


class _Payload:
    """Unpickling this would create a file; a flight-recorder reader must never do it."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_a_bundle_with_a_malicious_pickle_is_analysed_without_running_it(tmp_path, capsys):
    import pickle

    marker = tmp_path / "pwned"
    evidence = load_snapshot("mismatch")
    evidence.nodes[0].flight_recorder["/var/log/train/fr/trace_rank_0"] = pickle.dumps(
        {"entries": [_Payload(marker)]}
    )
    path = tmp_path / "evil.tar.gz"
    path.write_bytes(write_bundle(evidence))
    call_command("diagnose", "--bundle", str(path), "--json")
    diagnosis = json.loads(capsys.readouterr().out)
    assert not marker.exists()
    problems = [p for p in diagnosis["parse_problems"] if "trace_rank_0" in p["source"]]
    assert problems and "refusing to load io.open" in problems[0]["problem"]
    assert diagnosis["classification"] == "B"  # the other ranks' dumps still count
