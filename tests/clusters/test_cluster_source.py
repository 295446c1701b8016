"""Where a cluster finds its nodes: its own list, a Slurm job, a Ray job, or pushed bundles."""

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from clusters.models import Cluster, ClusterSource
from clusters.services import cluster_create, cluster_update
from collectors.services import SnapshotRefused, snapshot_create
from core.services import api_token_create
from incidents.services import incident_open
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db

SLURM = {
    "source": "slurm",
    "controller_address": "127.0.9.100",
    "controller_host_key": HOST_KEY,
    "known_hosts_path": "/etc/hangdesk/known_hosts",
}


def test_it_keeps_a_hand_kept_node_list_by_default(cluster):
    assert Cluster.objects.get(pk=cluster.pk).source == ClusterSource.NODES


def test_it_refuses_a_slurm_cluster_without_its_controller_or_known_hosts():
    with pytest.raises(ValidationError) as refused:
        cluster_create(name="no-controller", source="slurm")
    errors = refused.value.message_dict
    assert "Slurm controller's address" in errors["controller_address"][0]
    assert "host key" in errors["controller_host_key"][0]
    assert "known_hosts" in errors["known_hosts_path"][0]
    assert not Cluster.objects.filter(name="no-controller").exists()


def test_it_refuses_a_relative_known_hosts_path():
    with pytest.raises(ValidationError, match="absolute path"):
        cluster_create(name="relative", **{**SLURM, "known_hosts_path": "known_hosts"})


def test_it_keeps_the_controller_host_key_as_type_and_base64():
    cluster = cluster_create(
        name="slurm-a", **{**SLURM, "controller_host_key": f"ctl.example {HOST_KEY} root@ctl"}
    )
    assert cluster.controller_host_key == HOST_KEY
    assert cluster.uses_scheduler


def test_a_ray_cluster_names_the_ray_head_in_its_errors():
    with pytest.raises(ValidationError, match="Ray head"):
        cluster_create(name="ray-a", source="ray")


def test_a_push_cluster_needs_no_ssh_settings_and_its_snapshot_waits_for_bundles(cluster, bob):
    cluster_update(cluster=cluster, source="push", expected_nodes=2)
    incident = incident_open(cluster=cluster, title="stuck", opened_by=bob)
    created = snapshot_create(incident=incident, by=bob)
    assert created.created and created.collection_ids == ()  # no node to visit over SSH
    assert created.snapshot.waits_for_uploads and created.snapshot.expected_nodes == 2
    assert not created.snapshot.collections.exists()


def test_the_api_shows_and_sets_the_source(alice, cluster):
    client = APIClient()
    _, secret = api_token_create(user=alice, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get(f"/api/v1/clusters/{cluster.name}/").json()["source"] == "nodes"
    bad = client.patch(f"/api/v1/clusters/{cluster.name}/", {"source": "slurm"}, format="json")
    assert bad.status_code == 400
    assert "controller_address" in str(bad.json())
    assert Cluster.objects.get(pk=cluster.pk).source == "nodes"
    good = client.patch(f"/api/v1/clusters/{cluster.name}/", SLURM, format="json")
    assert good.status_code == 200, good.json()
    assert good.json()["source"] == "slurm"
    assert good.json()["known_hosts_path"] == "/etc/hangdesk/known_hosts"
    unknown = client.patch(f"/api/v1/clusters/{cluster.name}/", {"source": "k8s"}, format="json")
    assert unknown.status_code == 400


def test_the_form_offers_every_source(alice, as_user, cluster):
    page = as_user(alice).get(f"/clusters/{cluster.name}/edit/")
    text = page.content.decode()
    for value in ("nodes", "slurm", "ray", "push"):
        assert f'value="{value}"' in text


def test_a_ray_cluster_needs_its_ray_job_and_takes_no_slurm_job_and_opens_nothing(bob):
    from collectors.starts import snapshot_start

    cluster = cluster_create(name="ray-b", **{**SLURM, "source": "ray"})
    incident = incident_open(cluster=cluster, title="stuck", opened_by=bob)
    with pytest.raises(SnapshotRefused, match="snapshots a Ray job: give its id"):
        snapshot_start(incident=incident, by=bob)
    client = APIClient()
    _, secret = api_token_create(user=bob, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    before = cluster.incidents.count()
    answers = [
        client.post("/api/v1/incidents/", {"title": "t", "cluster": "ray-b", **job}, format="json")
        for job in ({}, {"slurm_job": "1"}, {"ray_job": "x; ray stop"})
    ]
    assert [a.status_code for a in answers] == [400, 400, 400]
    assert "snapshots a Ray job: give its id" in str(answers[0].json()["ray_job"])
    assert "is a Ray cluster; it takes no Slurm job" in str(answers[1].json()["slurm_job"])
    assert "is not a Ray job" in str(answers[2].json()["ray_job"])
    assert cluster.incidents.count() == before


def test_a_listed_cluster_takes_no_ray_job(cluster, bob):
    client = APIClient()
    _, secret = api_token_create(user=bob, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    answer = client.post(
        "/api/v1/incidents/", {"title": "t", "cluster": cluster.name, "ray_job": "r"}, format="json"
    )
    assert answer.status_code == 400
    assert "lists its own nodes; it takes no Ray job" in str(answer.json()["ray_job"])
    assert not cluster.incidents.exists()


def test_a_slurm_cluster_needs_a_job_id_to_open_and_a_listed_one_takes_none(cluster, bob):
    slurm_cluster = cluster_create(name="slurm-b", **SLURM)
    client = APIClient()
    _, secret = api_token_create(user=bob, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    no_job = client.post("/api/v1/incidents/", {"title": "t", "cluster": "slurm-b"}, format="json")
    assert no_job.status_code == 400 and "give its id" in str(no_job.json())
    listed = client.post(
        "/api/v1/incidents/",
        {"title": "t", "cluster": cluster.name, "slurm_job": "12"},
        format="json",
    )
    assert listed.status_code == 400 and "takes no Slurm job" in str(listed.json())
    assert not slurm_cluster.incidents.exists() and not cluster.incidents.exists()


def test_a_controller_the_egress_policy_refuses_is_refused_before_any_connection(settings):
    from collectors.scheduler import JobRefused, slurm_outputs

    cluster = cluster_create(
        name="slurm-meta", **{**SLURM, "controller_address": "169.254.169.254"}
    )
    with pytest.raises(JobRefused, match=r"169\.254\.169\.254:22.*refused by policy.*link-local"):
        slurm_outputs(cluster, "1")
