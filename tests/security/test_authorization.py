"""Authorization gaps found by the review (issue 11): the schema served anonymously, an
unbounded bundle-import API, closed incidents writable through the API, admins who are not
staff."""

import io

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from rest_framework.test import APIClient

from collectors.models import Snapshot
from core.services import api_token_create
from incidents.models import EventKind, Incident, Status
from incidents.services import incident_change_status, incident_open

pytestmark = pytest.mark.django_db


def _api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


@pytest.fixture
def incident(bob, cluster) -> Incident:
    return incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")


@pytest.fixture
def closed(incident, bob) -> Incident:
    for status in (Status.RESOLVED, Status.CLOSED):
        incident_change_status(incident=incident, to_status=status, by=bob)
    return incident


def test_the_api_schema_needs_a_login_or_a_token(carol):
    accept = {"HTTP_ACCEPT": "application/vnd.oai.openapi+json"}
    assert _api().get("/api/schema/", **accept).status_code == 401
    assert _api(carol).get("/api/schema/", **accept).status_code == 200


def test_a_bundle_import_over_512_mib_is_refused_with_413_before_it_is_read(bob, incident):
    too_big = str(600 * 1024 * 1024)
    answer = _api(bob).post(
        f"/api/v1/incidents/{incident.pk}/bundles/",
        {"bundle": io.BytesIO(b"x" * 64)},
        format="multipart",
        CONTENT_LENGTH=too_big,
    )
    assert answer.status_code == 413
    assert "over the 512 MiB bundle limit" in answer.json()["bundle"]
    assert not Snapshot.objects.exists()


def test_an_uploaded_file_over_the_cap_is_refused_with_413(bob, incident, monkeypatch):
    import collectors.apis

    monkeypatch.setattr(collectors.apis, "MAX_BUNDLE_UPLOAD_BYTES", 1024)
    upload = io.BytesIO(b"x" * 4096)
    upload.name = "big.tar.gz"
    answer = _api(bob).post(
        f"/api/v1/incidents/{incident.pk}/bundles/", {"bundle": upload}, format="multipart"
    )
    assert answer.status_code == 413


def test_a_closed_incident_is_read_only_through_the_api(bob, closed):
    api = _api(bob)
    events = closed.events.count()
    refusals = [
        api.post(f"/api/v1/incidents/{closed.pk}/notes/", {"text": "late"}, format="json"),
        api.patch(f"/api/v1/incidents/{closed.pk}/", {"title": "renamed"}, format="json"),
        api.post(f"/api/v1/incidents/{closed.pk}/snapshots/"),
        api.post(
            f"/api/v1/incidents/{closed.pk}/bundles/",
            {"bundle": io.BytesIO(b"not read")},
            format="multipart",
        ),
    ]
    for answer in refusals:
        assert answer.status_code == 409, answer.content
        assert "closed" in str(answer.json())
    closed.refresh_from_db()
    assert closed.title == "hung"
    assert closed.events.count() == events
    assert not Snapshot.objects.exists()
    assert api.get(f"/api/v1/incidents/{closed.pk}/").status_code == 200


def test_a_closed_incident_is_read_only_through_the_pages(bob, closed, as_user):
    client = as_user(bob)
    page = closed.get_absolute_url()
    done = client.post(
        reverse("incidents:note", args=[closed.pk]), {"text": "late"}, HTTP_REFERER=page
    )
    assert done.status_code in (200, 302, 303)
    assert not closed.events.filter(kind=EventKind.NOTE).exists()
    shown = client.get(page)
    assert "is closed: it is read-only" in shown.content.decode()
    client.post(reverse("collectors:start", args=[closed.pk]))
    assert not Snapshot.objects.exists()


def test_an_admin_is_staff_so_the_admin_link_opens_the_admin_site(alice, carol, client):
    alice.refresh_from_db()
    assert alice.is_staff and not alice.is_superuser
    client.force_login(alice)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/clusters/cluster/").status_code == 200


def test_staff_follows_the_admin_group_both_ways(alice, carol):
    admins = Group.objects.get(name="admin")
    alice.groups.remove(admins)
    alice.refresh_from_db()
    assert not alice.is_staff
    admins.user_set.add(carol)
    carol.refresh_from_db()
    assert carol.is_staff
    carol.groups.clear()
    carol.refresh_from_db()
    assert not carol.is_staff
