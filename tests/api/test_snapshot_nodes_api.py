"""A snapshot's nodes through the API: its progress carries the first page of them (every node
of a small snapshot, as before), `/api/v1/snapshots/N/nodes/` the rest a page at a time, or
the nodes of one status; and the README's lines that list the failed ones, run as written
against a live server."""

from __future__ import annotations

import subprocess

import pytest
from rest_framework.test import APIClient

from collectors.models import NodeCollection, NodeStatus, Snapshot
from collectors.progress_apis import NODE_PAGE
from core.services import api_token_create
from incidents.services import incident_open
from tests.clikit import readme_block

NODES = 2 * NODE_PAGE + 7
FAILED = {17: "did not answer the login within 10s", 900: "connection refused"}


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=user, name='t')[1]}")
    return client


def _snapshot(cluster, bob) -> Snapshot:
    incident = incident_open(opened_by=bob, title="fleet", cluster=cluster)
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, source="test")
    NodeCollection.objects.bulk_create(
        NodeCollection(
            snapshot=snapshot, node_name=f"node-{i:04d}", address=f"127.0.{i // 250}.{i % 250}",
            status=NodeStatus.FAILED if i in FAILED else NodeStatus.OK,
            reason=FAILED.get(i, ""),
        )
        for i in range(NODES)
    )  # fmt: skip
    return snapshot


@pytest.mark.django_db
def test_the_progress_carries_the_first_page_and_the_rest_comes_page_by_page(bob, cluster):
    snapshot, client = _snapshot(cluster, bob), _client(bob)
    progress = client.get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert progress["counts"]["total"] == NODES and progress["counts"]["failed"] == 2
    assert [n["node_name"] for n in progress["nodes"]] == [
        f"node-{i:04d}" for i in range(NODE_PAGE)
    ]
    names, url = [], progress["nodes_next"]
    assert url.endswith(
        f"/api/v1/snapshots/{snapshot.pk}/nodes/?offset={NODE_PAGE}&limit={NODE_PAGE}"
    )
    pages = 0
    while url:
        page = client.get(url).json()
        assert page["count"] == NODES and len(page["results"]) <= NODE_PAGE
        names += [n["node_name"] for n in page["results"]]
        url, pages = page["next"], pages + 1
    assert pages == 2 and names == [f"node-{i:04d}" for i in range(NODE_PAGE, NODES)]
    last = client.get(f"/api/v1/snapshots/{snapshot.pk}/nodes/?offset=1000&limit=3").json()
    assert [n["node_name"] for n in last["results"]] == ["node-1000", "node-1001", "node-1002"]
    assert last["previous"].endswith("?offset=997&limit=3") and last["next"].endswith(
        "offset=1003&limit=3"
    )
    failed = client.get(f"/api/v1/snapshots/{snapshot.pk}/nodes/?status=failed").json()
    assert failed["count"] == 2 and failed["next"] is None
    assert [(n["node_name"], n["reason"]) for n in failed["results"]] == [
        (f"node-{i:04d}", why) for i, why in sorted(FAILED.items())
    ]
    for bad in ("limit=0", f"limit={NODE_PAGE + 1}", "offset=-1", "status=lost"):
        assert client.get(f"/api/v1/snapshots/{snapshot.pk}/nodes/?{bad}").status_code == 400
    assert client.get("/api/v1/snapshots/999999/nodes/").status_code == 404


@pytest.mark.django_db
def test_a_small_snapshot_lists_every_node_as_before(bob, cluster):
    incident = incident_open(opened_by=bob, title="small", cluster=cluster)
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, source="test")
    for name in ("gpu-1", "gpu-0"):
        snapshot.collections.create(node_name=name, address="(test)")
    progress = _client(bob).get(f"/api/v1/snapshots/{snapshot.pk}/").json()
    assert [n["node_name"] for n in progress["nodes"]] == ["gpu-0", "gpu-1"]
    assert progress["nodes_next"] is None


@pytest.mark.django_db(transaction=True)
def test_the_readme_lists_the_failed_nodes(live_server, bob, carol, cluster, tmp_path):
    snapshot = _snapshot(cluster, bob)
    _, token = api_token_create(user=carol, name="script")  # a viewer follows snapshots too
    script = "\n".join(readme_block("tests/api/test_snapshot_nodes_api.py"))
    env = {"PATH": "/usr/bin:/bin", "HANGDESK_URL": live_server.url, "HANGDESK_TOKEN": token,
           "SNAPSHOT": str(snapshot.pk)}  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"node-{i:04d}: {why}" for i, why in sorted(FAILED.items())]
