import zlib

import pytest
from django.urls import reverse

from collectors.models import Artifact, NodeCollection, Snapshot, SnapshotStatus
from incidents.services import incident_open

pytestmark = pytest.mark.django_db


@pytest.fixture
def incident(bob, cluster):
    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


def test_the_button_starts_one_snapshot_and_a_second_click_reuses_it(as_user, bob, incident):
    client = as_user(bob)
    url = reverse("collectors:start", args=[incident.pk])
    client.post(url)
    response = client.post(url, follow=True)
    assert Snapshot.objects.count() == 1
    assert "is already running; showing it" in response.content.decode()
    page = response.content.decode()
    assert 'hx-trigger="every 1s"' in page
    assert "0 ok · 0 failed · 0 collecting · 2 pending of 2 nodes" in page


def test_a_viewer_cannot_take_a_snapshot(as_user, carol, incident):
    response = as_user(carol).post(reverse("collectors:start", args=[incident.pk]))
    assert response.status_code == 403
    assert not Snapshot.objects.exists()


def test_polling_stops_and_the_page_fetches_the_verdict_once_the_snapshot_is_done(
    as_user, bob, incident
):
    client = as_user(bob)
    client.post(reverse("collectors:start", args=[incident.pk]))
    snapshot = Snapshot.objects.get()
    url = reverse("collectors:progress", args=[snapshot.pk])
    running = client.get(url, headers={"HX-Request": "true"})
    assert "HX-Trigger" not in running
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.DONE)
    done = client.get(url, headers={"HX-Request": "true"})
    # no reload: the page's live poll is told to fetch the verdict and the timeline now
    assert "HX-Refresh" not in done
    assert done["HX-Trigger"] == "incident-changed"
    assert "hx-trigger" not in done.content.decode()


def test_raw_evidence_is_served_as_plain_text(as_user, bob, incident):
    client = as_user(bob)
    client.post(reverse("collectors:start", args=[incident.pk]))
    snapshot = Snapshot.objects.get()
    collection = NodeCollection.objects.filter(snapshot=snapshot).first()
    hostile = b"<script>alert(1)</script>\xff\xfe"
    artifact = Artifact.objects.create(
        collection=collection, name="dmesg.txt", compressed=zlib.compress(hostile), size=9
    )
    url = reverse("collectors:artifact", args=[snapshot.pk, artifact.pk])
    response = client.post(url, {"raw": "1"})  # as collected (the default view masks secrets)
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == hostile
