"""Raw evidence reads and raw exports were plain GETs: another site could make a logged-in
responder's browser perform them, and the audit log blamed the responder. Now a GET asks
for nothing raw (it gets a button), and a raw read is a POST that carries its CSRF token.
Artifact names that came from a node (CR/LF, non-ASCII) download under their name."""

from __future__ import annotations

import zlib

import pytest
from django.test import Client
from django.urls import reverse

from collectors.models import Artifact, NodeCollection
from core.models import AuditAction, AuditEvent
from tests.security.test_evidence_secrets import _environ_artifact

pytestmark = pytest.mark.django_db
RAW_READS = (AuditAction.RAW_EVIDENCE_READ, AuditAction.RAW_BUNDLE_EXPORT)


@pytest.fixture
def browser_of_bob(bob) -> Client:
    """A browser with bob's session, that checks CSRF as the real middleware does."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    return client


def _raw_reads() -> int:
    return AuditEvent.objects.filter(action__in=RAW_READS).count()


def test_a_cross_site_get_reads_no_raw_evidence_and_blames_nobody(
    leaky_snapshot, bobs_token, browser_of_bob
):
    artifact = _environ_artifact(leaky_snapshot)
    urls = [
        reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk]) + "?raw=1",
        reverse("collectors:artifact_view", args=[leaky_snapshot.pk, artifact.pk]) + "?raw=1",
        reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk]) + "?raw=1&download=1",
        reverse("collectors:bundle_export", args=[leaky_snapshot.pk]) + "?raw=1",
    ]
    for url in urls:
        answer = browser_of_bob.get(url)
        assert answer.status_code == 200 and b"Show it raw" in answer.content
        assert bobs_token.encode() not in answer.content
    assert _raw_reads() == 0


def test_a_raw_read_without_the_csrf_token_is_refused(leaky_snapshot, browser_of_bob):
    artifact = _environ_artifact(leaky_snapshot)
    url = reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk])
    assert browser_of_bob.post(url, {"raw": "1"}).status_code == 403
    export = reverse("collectors:bundle_export", args=[leaky_snapshot.pk])
    assert browser_of_bob.post(export, {"raw": "1"}).status_code == 403
    assert _raw_reads() == 0


def test_the_button_reads_it_raw_and_the_audit_log_has_it(
    leaky_snapshot, bobs_token, browser_of_bob
):
    artifact = _environ_artifact(leaky_snapshot)
    url = reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk])
    confirm = browser_of_bob.get(url + "?raw=1")
    token = confirm.context["csrf_token"]
    raw = browser_of_bob.post(url, {"raw": "1", "csrfmiddlewaretoken": str(token)})
    assert raw.status_code == 200 and bobs_token.encode() in raw.content
    assert _raw_reads() == 1


def test_a_raw_export_over_a_session_is_not_a_get_in_the_api(leaky_snapshot, browser_of_bob):
    url = f"/api/v1/snapshots/{leaky_snapshot.pk}/bundle/"
    assert browser_of_bob.get(url + "?raw=1").status_code == 403
    assert browser_of_bob.post(url, {"raw": "1"}).status_code == 403  # no CSRF token
    assert browser_of_bob.get(url).status_code == 200  # masked: fine over a GET
    assert _raw_reads() == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dmesg\r\nSet-Cookie: session=stolen", 'filename="dmesg__Set-Cookie: session=stolen.txt"'),
        ("журнал.log", "filename*=utf-8''%D0%B6%D1%83%D1%80%D0%BD%D0%B0%D0%BB.log.txt"),
    ],
)
def test_an_artifact_named_by_a_node_downloads_under_its_name(
    leaky_snapshot, bob, as_user, name, expected
):
    collection = NodeCollection.objects.filter(snapshot=leaky_snapshot).first()
    artifact = Artifact.objects.create(
        collection=collection, name=name, compressed=zlib.compress(b"line\n"), size=5
    )
    client = as_user(bob)
    for view in ("collectors:artifact", "collectors:artifact_view"):
        answer = client.get(reverse(view, args=[leaky_snapshot.pk, artifact.pk]) + "?download=1")
        assert answer.status_code == 200
    download = client.get(
        reverse("collectors:artifact", args=[leaky_snapshot.pk, artifact.pk]) + "?download=1"
    )
    header = download["Content-Disposition"]
    assert header == f"attachment; {expected}" and "\r" not in header and "\n" not in header
