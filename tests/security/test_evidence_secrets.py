"""Secrets in collected evidence: a viewer reads none; responders read raw evidence on
purpose, and the audit log says who did (issue 11: a viewer read a responder's
HANGDESK_TOKEN from an environ artifact and used it to write notes)."""

import io
import tarfile

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from analysis.evidence import not_gathered
from collectors.bundles import read_bundle_bytes
from collectors.models import Artifact
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from core.models import AuditAction, AuditEvent
from core.services import api_token_create
from tests.security.conftest import HF, PASSWORD

pytestmark = pytest.mark.django_db


def _environ_artifact(snapshot) -> Artifact:
    return Artifact.objects.filter(
        collection__snapshot=snapshot, name__startswith="environ/"
    ).first()


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


def _leaks(body: bytes, *secrets: str) -> list[str]:
    return [s for s in secrets if s.encode() in body]


def test_a_viewer_cannot_read_a_responders_token_from_an_environ_artifact(
    leaky_snapshot, bobs_token, carol, as_user
):
    artifact = _environ_artifact(leaky_snapshot)
    assert bobs_token.encode() in artifact.content  # it was collected, as in the report
    client = as_user(carol)
    url = reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk])
    assert client.get(url).status_code == 403
    assert client.get(url + "?raw=1").status_code == 403
    assert client.post(url, {"raw": "1"}).status_code == 403
    pages = [
        client.get(leaky_snapshot.incident.get_absolute_url()),
        client.get(reverse("collectors:detail", args=[leaky_snapshot.pk])),
        client.get(reverse("collectors:detail", args=[leaky_snapshot.pk]) + "?node=gpu-0"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert _leaks(page.content, bobs_token, HF, PASSWORD) == []


def test_the_stolen_token_cannot_be_had_from_the_api_or_an_export(
    leaky_snapshot, bobs_token, carol, as_user
):
    api = _api(carol)
    answers = [
        api.get(f"/api/v1/snapshots/{leaky_snapshot.pk}/"),
        api.get(f"/api/v1/snapshots/{leaky_snapshot.pk}/diagnosis/"),
        api.get(f"/api/v1/incidents/{leaky_snapshot.incident_id}/"),
    ]
    for answer in answers:
        assert answer.status_code == 200
        assert _leaks(answer.content, bobs_token, HF, PASSWORD) == []
    assert api.get(f"/api/v1/snapshots/{leaky_snapshot.pk}/bundle/").status_code == 403
    page = as_user(carol).get(reverse("collectors:bundle_export", args=[leaky_snapshot.pk]))
    assert page.status_code == 403


def test_a_responder_reads_evidence_masked_and_raw_only_on_purpose_and_audited(
    leaky_snapshot, bobs_token, bob, as_user
):
    artifact = _environ_artifact(leaky_snapshot)
    client = as_user(bob)
    url = reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk])
    masked = client.get(url)
    assert masked.status_code == 200
    assert _leaks(masked.content, bobs_token, HF) == []
    assert b"HANGDESK_TOKEN=[REDACTED:" in masked.content
    assert b"RANK=" in masked.content  # the rest of the environment is readable
    assert not AuditEvent.objects.filter(action=AuditAction.RAW_EVIDENCE_READ).exists()
    raw = client.post(url, {"raw": "1"})
    assert bobs_token.encode() in raw.content
    event = AuditEvent.objects.get(action=AuditAction.RAW_EVIDENCE_READ)
    assert event.username == "bob"
    assert event.incident_id == leaky_snapshot.incident_id
    assert artifact.name in event.target


def test_a_ps_artifact_is_masked_for_responders_too(leaky_snapshot, bob, as_user):
    ps = Artifact.objects.get(collection__snapshot=leaky_snapshot, name="ps.txt")
    shown = as_user(bob).get(reverse("collectors:artifact", args=[leaky_snapshot.pk, ps.pk]))
    assert _leaks(shown.content, HF, PASSWORD) == []
    assert b"python train.py --password=[REDACTED:" in shown.content


def test_an_export_is_masked_unless_raw_and_both_are_audited(
    leaky_snapshot, bobs_token, bob, as_user
):
    page = as_user(bob).get(reverse("collectors:bundle_export", args=[leaky_snapshot.pk]))
    api = _api(bob).get(f"/api/v1/snapshots/{leaky_snapshot.pk}/bundle/")
    for body in (page.content, api.content):
        with tarfile.open(fileobj=io.BytesIO(body)) as tar:
            everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
        assert _leaks(everything, bobs_token, HF, PASSWORD) == []
    # A masked export still tells ranks apart and diagnoses the same way.
    evidence = read_bundle_bytes(page.content)
    assert len(evidence.nodes[0].environ) == 4
    raw = _api(bob).get(f"/api/v1/snapshots/{leaky_snapshot.pk}/bundle/?raw=1")
    assert raw["Content-Disposition"].endswith('-raw.tar.gz"')
    assert bobs_token.encode() in b"".join(
        content for content in read_bundle_bytes(raw.content).nodes[0].environ.values()
    )
    exports = AuditEvent.objects.exclude(action=AuditAction.TOKEN_CREATED).order_by("pk")
    assert list(exports.values_list("action", "via")) == [
        (AuditAction.BUNDLE_EXPORT, "page"),
        (AuditAction.BUNDLE_EXPORT, "api"),
        (AuditAction.RAW_BUNDLE_EXPORT, "api"),
    ]


def test_a_launcher_line_quoting_a_command_line_is_stored_masked(
    incident, django_capture_on_commit_callbacks
):
    # DeepSpeed's launcher quotes the whole command of a rank that died (corpus case 10);
    # a job that takes its token as an argument puts the token in the verdict's evidence.
    from pathlib import Path

    import analysis
    from collectors.bundles import read_bundle

    evidence = read_bundle(
        Path(__file__).parents[1] / "analysis/corpus/10-deepspeed-launcher-segfault-rank1"
    )
    node = evidence.nodes[0]
    for path, text in node.logs.items():
        node.logs[path] = text.replace(
            "'--deepspeed', ", f"'--hf_token', '{HF}', '--db-password={PASSWORD}', '--deepspeed', "
        )
    raw = analysis.diagnose(evidence).to_json()
    assert HF in str(raw) and PASSWORD in str(raw)  # what was stored before masking
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence)
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    stored = str(snapshot.diagnosis)
    assert HF not in stored and PASSWORD not in stored
    assert snapshot.diagnosis["classification"] == raw["classification"]
    assert "'--hf_token', '[REDACTED:" in stored


def test_a_node_failure_quoting_a_secret_is_stored_masked(incident, carol):
    from analysis.evidence import NodeEvidence, SnapshotEvidence
    from collectors.services import snapshot_store_bundle

    failed = NodeEvidence(
        node="gpu-9",
        status=not_gathered(f"probe failed: exit status 1: env: HF_TOKEN={HF}: not found"),
    )
    snapshot = snapshot_store_bundle(
        incident=incident, evidence=SnapshotEvidence(nodes=[failed], cluster="lab")
    )
    reason = snapshot.collections.get().reason
    assert HF not in reason and reason.startswith("probe failed: exit status 1: env: HF_TOKEN=[")
    assert HF.encode() not in _api(carol).get(f"/api/v1/snapshots/{snapshot.pk}/").content
