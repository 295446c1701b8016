"""Push mode: a cluster the console cannot reach sends its evidence. Its snapshot waits for the
nodes' bundles, admitted by an upload token (random, shown once, kept hashed, for one snapshot,
expiring), each an untrusted bundle read within the import's limits; the last expected node
starts the analysis, which reaches the verdict the whole evidence gives."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

import analysis
from analysis.evidence import SnapshotEvidence
from bench.bench_analysis import build_snapshot
from clusters.services import cluster_create
from collectors import push
from collectors.bundles import write_bundle
from collectors.models import NodeCollection, Snapshot, SnapshotStatus, UploadToken
from collectors.services import snapshot_analyse
from collectors.tasks import fail_stale_collections
from core.services import api_token_create
from incidents.services import incident_open
from tests import hostile

pytestmark = pytest.mark.django_db


@pytest.fixture
def push_cluster(db):
    return cluster_create(
        name="cloud-train",
        source="push",
        expected_nodes=2,
        expected_world_size=8,
        log_globs=["/var/log/train/*.log"],
    )


@pytest.fixture
def incident(bob, push_cluster):
    return incident_open(opened_by=bob, title="stuck", cluster=push_cluster, severity="SEV1")


@pytest.fixture(scope="module")
def evidence() -> SnapshotEvidence:
    return build_snapshot(8, 2, stuck_rank=3)  # node-000, node-001; rank 3 outside: A


def _node_bundle(evidence: SnapshotEvidence, index: int) -> bytes:
    one = SnapshotEvidence(nodes=[evidence.nodes[index]], expected_world_size=8)
    return write_bundle(one, {"collector": "hangdesk collect"})


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


def _start(user, incident) -> dict:
    answer = _api(user).post(f"/api/v1/incidents/{incident.pk}/snapshots/")
    assert answer.status_code == 201, answer.content
    return answer.json()


def _upload(incident, token: str, body: bytes, **headers):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", **headers)
    return client.generic(
        "POST", f"/api/v1/incidents/{incident.pk}/uploads/", body, "application/gzip"
    )


def test_a_push_snapshot_waits_with_a_token_shown_once_and_kept_hashed(bob, incident):
    started = _start(bob, incident)
    token = started["upload_token"]
    assert token.startswith("hds_") and len(token) > 40
    assert started["status"] == "running" and started["expected_nodes"] == 2
    assert f"--token {token}" in started["upload_command"]
    assert "hangdesk collect --logs '/var/log/train/*.log' --pattern " in started["upload_command"]
    snapshot = Snapshot.objects.get(pk=started["id"])
    assert snapshot.waits_for_uploads and not snapshot.collections.exists()
    stored = UploadToken.objects.get(snapshot=snapshot)
    assert stored.key_hash == push.token_hash(token) and stored.prefix == token[:12]
    # The token itself is in no table: only its hash and prefix.
    with connection.cursor() as cursor:
        cursor.execute("SELECT key_hash, prefix FROM collectors_uploadtoken")
        assert all(token not in str(row) for row in cursor.fetchall())
    # Asking again (a second responder) returns the same snapshot and another working token.
    again = _api(bob).post(f"/api/v1/incidents/{incident.pk}/snapshots/")
    assert again.status_code == 200 and again.json()["id"] == snapshot.pk
    assert again.json()["upload_token"] != token
    assert UploadToken.objects.filter(snapshot=snapshot).count() == 2


def test_each_node_sends_and_the_last_one_starts_the_analysis(
    bob, incident, evidence, django_capture_on_commit_callbacks
):
    token = _start(bob, incident)["upload_token"]
    first = _upload(incident, token, _node_bundle(evidence, 0))
    assert first.status_code == 201, first.content
    receipt = first.json()
    assert receipt["received"] == 1 and receipt["expected"] == 2 and not receipt["analysis_due"]
    assert (
        receipt["message"]
        == f"node-000 stored in snapshot {receipt['snapshot']}: 1 of 2 nodes sent"
    )
    # The same node sending again replaces what it sent: still one of two.
    again = _upload(incident, token, _node_bundle(evidence, 0))
    assert again.json()["received"] == 1
    with django_capture_on_commit_callbacks() as queued:
        last = _upload(incident, token, _node_bundle(evidence, 1))
    assert last.json()["analysis_due"] and last.json()["status"] == "analysing"
    assert len(queued) == 1  # the analysis, queued once committed
    snapshot = Snapshot.objects.get(pk=last.json()["snapshot"])
    assert sorted(snapshot.collections.values_list("node_name", flat=True)) == [
        "node-000",
        "node-001",
    ]
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    whole = analysis.diagnose(evidence).to_json()
    assert snapshot.status == SnapshotStatus.DONE
    for key in ("classification", "suspect_ranks", "missing_ranks", "last_completed_step"):
        assert snapshot.diagnosis[key] == whole[key], key
    assert snapshot.diagnosis["classification"] == "A" and snapshot.diagnosis["suspect_ranks"] == [
        3
    ]
    # Its token admits nothing more: the snapshot no longer waits.
    late = _upload(incident, token, _node_bundle(evidence, 1))
    assert late.status_code == 401
    assert "no longer waits" in late.json()["detail"]
    summaries = list(incident.events.values_list("summary", flat=True))
    assert any("node-001 sent its bundle (2 of 2 nodes in); analysing" in s for s in summaries)


def test_a_token_admits_its_own_snapshot_only_and_expires(bob, incident, push_cluster, evidence):
    token = _start(bob, incident)["upload_token"]
    other = incident_open(opened_by=bob, title="other", cluster=push_cluster, severity="SEV2")
    elsewhere = _upload(other, token, _node_bundle(evidence, 0))
    assert elsewhere.status_code == 403
    assert "not INC-" in elsewhere.json()["detail"]
    assert _upload(incident, "hds_" + "x" * 43, b"").status_code == 401  # unknown
    Snapshot.objects.filter(incident=incident).update(upload_until=timezone.now())
    expired = _upload(incident, token, _node_bundle(evidence, 0))
    assert expired.status_code == 401
    assert not NodeCollection.objects.exists()


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (hostile.extension_header_bomb(b"L"), "a GNU long name of 1610612736 bytes is over"),
        (hostile.tar_gz(hostile.tar_file(b"gpu-0/logs/\xff.log", b"x")), "is not UTF-8"),
        (b'{"not": "a bundle"}', "it is JSON text"),
        (b"", "Send the bundle as the request body"),
    ],
    ids=["header-bomb", "not-utf8", "json", "empty"],
)
def test_an_upload_is_an_untrusted_bundle_read_within_the_import_limits(
    bob, incident, blob, reason
):
    token = _start(bob, incident)["upload_token"]
    answer = _upload(incident, token, blob)
    assert answer.status_code == 400, answer.content[:300]
    assert reason in answer.json()["bundle"]
    assert not NodeCollection.objects.exists()


def test_a_responder_api_token_starts_the_wait_a_viewer_cannot_upload(
    bob, carol, incident, evidence, cluster
):
    viewer = _upload(incident, api_token_create(user=carol, name="v")[1], b"x")
    assert viewer.status_code == 403
    responder_token = api_token_create(user=bob, name="watchdog")[1]
    stored = _upload(incident, responder_token, _node_bundle(evidence, 0))
    assert stored.status_code == 201, stored.content
    snapshot = Snapshot.objects.get(incident=incident)
    assert snapshot.waits_for_uploads and snapshot.requested_by == bob
    ssh_incident = incident_open(opened_by=bob, title="ssh", cluster=cluster, severity="SEV2")
    refused = _upload(ssh_incident, responder_token, _node_bundle(evidence, 0))
    assert refused.status_code == 409
    assert "is not a push cluster" in refused.json()["bundle"]


def test_the_wait_ends_with_what_arrived_or_fails_with_nothing(
    bob, incident, push_cluster, evidence, django_capture_on_commit_callbacks
):
    token = _start(bob, incident)["upload_token"]
    _upload(incident, token, _node_bundle(evidence, 0))
    empty = incident_open(opened_by=bob, title="empty", cluster=push_cluster, severity="SEV2")
    _start(bob, empty)
    Snapshot.objects.update(upload_until=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks() as queued:
        fail_stale_collections()
    assert len(queued) == 1
    waited = Snapshot.objects.get(incident=incident)
    assert waited.status == SnapshotStatus.ANALYSING
    nothing = Snapshot.objects.get(incident=empty)
    assert nothing.status == SnapshotStatus.FAILED
    assert nothing.error == "No node sent its bundle before the snapshot stopped waiting."
    summaries = incident.events.values_list("summary", flat=True)
    assert any(s.endswith("1 node sent their bundle; analysing") for s in summaries)


def test_the_page_shows_the_token_once_and_the_count_of_nodes_sent(
    as_user, bob, incident, evidence
):
    client = as_user(bob)
    shown = client.post(f"/incidents/{incident.pk}/snapshots/", HTTP_HX_REQUEST="true")
    page = shown.content.decode()
    assert shown["Cache-Control"] == "no-store"
    token = page.split('class="upload-token-value">', 1)[1].split("<", 1)[0]
    assert token.startswith("hds_") and f"--token {token}" in page
    assert "waits for 2 nodes to send their bundles" in page
    snapshot = Snapshot.objects.get(incident=incident)
    _upload(incident, token, _node_bundle(evidence, 0))
    panel = client.get(f"/snapshots/{snapshot.pk}/progress/").content.decode()
    assert "1 of 2 nodes sent" in panel and token not in panel
    incident_page = client.get(incident.get_absolute_url()).content.decode()
    assert token not in incident_page and "New upload token" in incident_page
    analysed = client.post(f"/snapshots/{snapshot.pk}/analyse/", HTTP_HX_REQUEST="true")
    assert "analysing the nodes that sent their bundle" in analysed.content.decode()
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.ANALYSING


def test_hangdesk_upload_sends_a_file_and_says_why_a_refusal(
    live_server, bob, push_cluster, evidence, tmp_path, transactional_db
):
    incident = incident_open(opened_by=bob, title="stuck", cluster=push_cluster, severity="SEV1")
    token = _start(bob, incident)["upload_token"]
    bundle = tmp_path / "node-000.tar.gz"
    bundle.write_bytes(_node_bundle(evidence, 0))

    def upload(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "hangdesk", "upload", *args, "--url", live_server.url]
        return subprocess.run(
            command, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=60, check=False
        )

    done = upload(str(bundle), "--incident", incident.reference, "--token", token)
    assert done.returncode == 0, done.stderr
    snapshot = incident.snapshots.get()
    assert (
        done.stderr
        == f"hangdesk upload: node-000 stored in snapshot {snapshot.pk}: 1 of 2 nodes sent\n"
    )
    assert done.stdout == ""  # nothing on standard output: a pipe stays clean
    refused = upload(str(bundle), "--incident", str(incident.pk), "--token", "hds_wrong")
    assert refused.returncode == 1
    assert refused.stderr == (
        "hangdesk upload: refused: HTTP 401: Unknown upload token, or its snapshot no longer "
        "waits for bundles.\n"
    )
    missing = upload(str(tmp_path / "none.tar.gz"), "--incident", "1", "--token", token)
    assert missing.returncode == 2 and "cannot read" in missing.stderr
