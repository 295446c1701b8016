"""The REST API: tokens, roles, every endpoint, and 4xx (never 500) on bad input."""

import pytest
from rest_framework.test import APIClient

from clusters.models import Node
from collectors.models import Snapshot
from core.models import ApiToken
from core.services import api_token_create
from incidents.models import Incident
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    def client_for(user=None):
        client = APIClient()
        if user is not None:
            _, secret = api_token_create(user=user, name="test")
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        return client

    return client_for


def test_without_a_token_the_api_answers_401_not_a_login_redirect(api, cluster):
    response = api().get("/api/v1/incidents/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_an_unknown_token_is_refused(api):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer hd_not-a-real-token")
    assert client.get("/api/v1/incidents/").status_code == 401


def test_tokens_are_stored_hashed(bob):
    token, secret = api_token_create(user=bob, name="watchdog")
    stored = ApiToken.objects.get(pk=token.pk)
    assert secret.startswith("hd_")
    assert secret not in stored.key_hash
    assert len(stored.key_hash) == 64
    assert stored.prefix == secret[:11]


def test_a_viewer_reads_but_cannot_write(api, carol, cluster):
    client = api(carol)
    assert client.get("/api/v1/clusters/").status_code == 200
    response = client.post(
        "/api/v1/incidents/", {"title": "x", "cluster": "gpt-train"}, format="json"
    )
    assert response.status_code == 403


def test_a_watchdog_opens_an_incident_and_starts_a_snapshot_in_one_call(api, bob, cluster):
    response = api(bob).post(
        "/api/v1/incidents/",
        {
            "title": "rank watchdog fired on step 14200",
            "cluster": "gpt-train",
            "severity": "SEV1",
            "snapshot": True,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["reference"] == f"INC-{body['id']}"
    assert body["snapshot"]["status"] == "running"
    assert Snapshot.objects.get().incident_id == body["id"]
    assert [e["kind"] for e in body["events"]] == ["opened"]


def test_incidents_move_through_statuses_and_take_notes(api, bob, cluster):
    client = api(bob)
    incident = client.post(
        "/api/v1/incidents/", {"title": "t", "cluster": "gpt-train"}, format="json"
    ).json()
    url = f"/api/v1/incidents/{incident['id']}/"
    moved = client.post(
        f"{url}status/", {"status": "investigating", "note": "on it"}, format="json"
    )
    assert moved.status_code == 200
    assert moved.json()["status"] == "investigating"
    conflict = client.post(f"{url}status/", {"status": "closed"}, format="json")
    assert conflict.status_code == 409
    assert "cannot move to closed" in conflict.json()["detail"]
    note = client.post(f"{url}notes/", {"text": "rank 7 gone", "pinned": True}, format="json")
    assert note.status_code == 201 and note.json()["pinned"] is True
    edited = client.patch(url, {"severity": "SEV1", "commander": "bob"}, format="json")
    assert edited.json()["commander"] == "bob"
    detail = client.get(url).json()
    assert [e["kind"] for e in detail["events"]] == ["opened", "status", "note", "edit"]
    listed = client.get("/api/v1/incidents/?status=investigating&severity=SEV1").json()
    assert [i["id"] for i in listed] == [incident["id"]]


@pytest.mark.parametrize(
    "payload",
    [
        {"title": "t", "cluster": "no-such-cluster"},
        {"title": "t", "cluster": "gpt-train", "severity": "SEV9"},
        {"title": "", "cluster": "gpt-train"},
        {"title": ["not", "a", "string"], "cluster": 5},
        [1, 2, 3],
        "just a string",
    ],
)
def test_bad_incident_input_is_a_400(api, bob, cluster, payload):
    response = api(bob).post("/api/v1/incidents/", payload, format="json")
    assert response.status_code == 400
    assert not Incident.objects.exists()


def test_malformed_json_is_a_400(api, bob):
    response = api(bob).post("/api/v1/incidents/", data="{nope", content_type="application/json")
    assert response.status_code == 400


def test_an_admin_manages_clusters_and_nodes(api, alice, bob):
    admin = api(alice)
    created = admin.post(
        "/api/v1/clusters/",
        {"name": "llama", "expected_world_size": 16, "log_globs": ["/var/log/train/*.log"]},
        format="json",
    )
    assert created.status_code == 201, created.content
    node = {"name": "n0", "address": "127.0.9.3", "host_key": f"{HOST_KEY} comment"}
    assert admin.post("/api/v1/clusters/llama/nodes/", node, format="json").status_code == 201
    duplicate = admin.post("/api/v1/clusters/llama/nodes/", node, format="json")
    assert duplicate.status_code == 400
    assert "already has a node named n0" in str(duplicate.json())
    bad_key = admin.post(
        "/api/v1/clusters/llama/nodes/",
        {**node, "name": "n1", "host_key": "ssh-ed25519 !!"},
        format="json",
    )
    assert bad_key.status_code == 400
    patched = admin.patch("/api/v1/clusters/llama/nodes/n0/", {"port": 2222}, format="json")
    assert patched.json()["port"] == 2222
    assert Node.objects.get().host_key == HOST_KEY
    assert api(bob).post("/api/v1/clusters/", {"name": "x"}, format="json").status_code == 403
    assert admin.delete("/api/v1/clusters/llama/nodes/n0/").status_code == 204


def test_a_snapshot_can_be_followed_and_its_diagnosis_waits_for_analysis(api, bob, cluster):
    client = api(bob)
    incident = client.post(
        "/api/v1/incidents/", {"title": "t", "cluster": "gpt-train"}, format="json"
    ).json()
    started = client.post(f"/api/v1/incidents/{incident['id']}/snapshots/")
    assert started.status_code == 201
    again = client.post(f"/api/v1/incidents/{incident['id']}/snapshots/")
    assert again.status_code == 200 and again.json()["id"] == started.json()["id"]
    progress = client.get(f"/api/v1/snapshots/{started.json()['id']}/").json()
    assert progress["counts"] == {"total": 2, "ok": 0, "failed": 0, "running": 0, "pending": 2}
    assert [n["node_name"] for n in progress["nodes"]] == ["gpu-0", "gpu-1"]
    waiting = client.get(f"/api/v1/snapshots/{started.json()['id']}/diagnosis/")
    assert waiting.status_code == 409


def test_the_openapi_schema_is_served(api, carol):
    response = api(carol).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert "/api/v1/incidents/{id}/status/" in schema["paths"]
    assert schema["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    # A node's upload is admitted by the push snapshot's upload token or a responder's token.
    upload = schema["paths"]["/api/v1/incidents/{id}/uploads/"]["post"]
    assert {"uploadToken": []} in upload["security"] and {"bearerAuth": []} in upload["security"]
    assert "hds_" in schema["components"]["securitySchemes"]["uploadToken"]["description"]


def test_the_diagnosis_is_documented_field_by_field_in_the_openapi_schema(api, carol):
    schema = api(carol).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    path = schema["paths"]["/api/v1/snapshots/{snapshot_pk}/diagnosis/"]["get"]
    ref = path["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    diagnosis = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    for field in ("classification", "suspect_ranks", "unobserved_ranks", "evidence", "per_rank"):
        assert field in diagnosis["properties"]
    classes = schema["components"]["schemas"]["ClassificationEnum"]["enum"]
    assert set(classes) == {"A", "B", "C", "straggler", "init", "healthy", "unknown"}
