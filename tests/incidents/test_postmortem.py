"""The post-mortem: drafted from what the incident knows, saved by a responder, read by all."""

import pytest
from rest_framework.test import APIClient

from collectors.services import snapshot_analyse, snapshot_record_decision
from collectors.tasks import snapshot_import_bundle
from core.services import api_token_create
from incidents.models import EventKind, PostMortem
from incidents.services import incident_add_note, incident_change_status, incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def worked_incident(bob, cluster, django_capture_on_commit_callbacks):
    incident = incident_open(opened_by=bob, title="run 12 hung", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("mismatch"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    snapshot_record_decision(snapshot=snapshot, by=bob, classification="B", note="rank 0 branch")
    incident_add_note(incident=incident, by=bob, text="extra broadcast on rank 0", pinned=True)
    incident_change_status(incident=incident, to_status="resolved", by=bob)
    return incident


def test_the_draft_is_prefilled_from_the_verdict_and_the_decision(as_user, bob, worked_incident):
    page = as_user(bob).get(f"/incidents/{worked_incident.pk}/postmortem/").content.decode()
    assert "INVALID_TEMPLATE_VARIABLE" not in page
    assert "Prefilled from the latest verdict" in page
    assert '<option value="B" selected>' in page
    assert "No collective under a rank-dependent branch" in page  # B's prevention
    assert "Resolved after" in page


def test_a_responder_saves_it_and_the_timeline_says_so(as_user, bob, worked_incident):
    client = as_user(bob)
    response = client.post(
        f"/incidents/{worked_incident.pk}/postmortem/",
        {
            "summary": "Rank 0 ran an extra broadcast.",
            "classification": "B",
            "root_cause": "if rank == 0: broadcast(...) in the eval hook",
            "action_items": "Remove the branch\n\nAdd a collective-order test",
        },
    )
    assert response.status_code == 302
    postmortem = PostMortem.objects.get()
    assert postmortem.action_item_list == ["Remove the branch", "Add a collective-order test"]
    assert worked_incident.events.filter(kind=EventKind.POSTMORTEM, author=bob).count() == 1
    page = client.get(f"/incidents/{worked_incident.pk}/postmortem/").content.decode()
    assert "extra broadcast on rank 0" in page  # the pinned note
    assert "Decision on snapshot" in page  # decisions are pinned too


def test_a_viewer_reads_but_cannot_write_it(as_user, carol, worked_incident):
    client = as_user(carol)
    assert (
        "No post-mortem has been written yet"
        in client.get(f"/incidents/{worked_incident.pk}/postmortem/").content.decode()
    )
    response = client.post(f"/incidents/{worked_incident.pk}/postmortem/", {"summary": "x"})
    assert response.status_code == 403
    assert not PostMortem.objects.exists()


def test_the_api_reads_the_post_mortem(bob, worked_incident):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    url = f"/api/v1/incidents/{worked_incident.pk}/postmortem/"
    assert client.get(url).status_code == 404
    PostMortem.objects.create(incident=worked_incident, summary="s", action_items="a\nb")
    body = client.get(url).json()
    assert body["incident"] == worked_incident.reference
    assert body["action_items"] == ["a", "b"]
    assert [e["kind"] for e in body["pinned_events"]] == ["decision", "note"]
