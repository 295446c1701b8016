"""Hostile bundles through the web (issue 11): a header bomb or a malformed archive is a 400 with
the reason, never a 500 and never gigabytes (the review: 510 KB of upload -> 1.28 GB); odd but
readable evidence is imported and analysed to DONE, never a snapshot marked failed."""

import json

import pytest
from rest_framework.test import APIClient

from collectors.bundles import read_bundle_bytes
from collectors.models import Snapshot, SnapshotStatus
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from core.services import api_token_create
from incidents.services import incident_open
from tests import hostile
from tests.hostile import PS_HEADER, tar_file, tar_gz

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(bob, cluster):
    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


def _post(incident, bob, tmp_path, blob: bytes):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    path = tmp_path / "upload.tar.gz"
    path.write_bytes(blob)
    with path.open("rb") as handle:
        return client.post(
            f"/api/v1/incidents/{incident.pk}/bundles/", {"bundle": handle}, format="multipart"
        )


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (hostile.extension_header_bomb(b"L"), "a GNU long name of 1610612736 bytes is over"),
        (hostile.extension_header_bomb(b"x"), "a PAX header of 1610612736 bytes is over"),
        (tar_gz(tar_file(b"gpu-0/logs/\xff.log", b"x")), "the member name is not UTF-8"),
        (tar_gz(tar_file(b"manifest.json", hostile.deep_json(100_000, "nodes"))), "nested too"),
    ],
    ids=["gnu-long-name", "pax-header", "not-utf8", "deep-manifest"],
)
def test_a_hostile_upload_is_a_400_with_the_reason(incident, bob, tmp_path, blob, reason):
    answer = _post(incident, bob, tmp_path, blob)
    assert answer.status_code == 400, answer.content[:500]
    assert reason in answer.json()["bundle"]
    assert Snapshot.objects.count() == 0


def test_odd_but_readable_evidence_is_analysed_to_done(
    incident, bob, django_capture_on_commit_callbacks
):
    odd = hostile.bundle_of(
        [
            (b"gpu-0/ps.txt", PS_HEADER + b"\xc2\xb2 1 S 5 python train.py\n"),
            (b"gpu-0/environ/\xc2\xb2", b"RANK=0\0"),
            (b"gpu-0/node.json", hostile.deep_json(100_000, "hostname")),
            (b"gpu-0/pyspy/7.json", b'[{"frames": 5}, {"thread_name": ["x"]}]'),
            (b"gpu-0/logs/rank0.log", b"step=1 step_time=0.2.07s loss=1e999\n" + b"q" * 300_000),
            (b"gpu-0/flight_recorder/trace_rank_0", hostile.shared_reference_pickle(30)),
        ],
        {"nodes": {"gpu-0": ["not", "a", "dict"]}, "world_size": 10**9},
    )
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=read_bundle_bytes(odd))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.DONE
    stored = json.dumps(snapshot.diagnosis)
    assert len(stored) < 200_000  # a 300 KB line and 2**30 leaves were not copied in
    problems = " ".join(p["problem"] for p in snapshot.diagnosis["parse_problems"])
    assert "not believed" in problems


def test_a_world_size_past_the_integer_column_is_no_claim(incident, bob, tmp_path):
    # 10**12 in the manifest was a DataError ("integer out of range"): a 500 on import.
    blob = hostile.bundle_of([(b"gpu-0/ps.txt", PS_HEADER)], {"world_size": 10**12})
    answer = _post(incident, bob, tmp_path, blob)
    assert answer.status_code == 201, answer.content[:500]
    assert Snapshot.objects.get().expected_world_size == incident.cluster.expected_world_size
