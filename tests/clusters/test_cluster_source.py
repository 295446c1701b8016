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


def test_a_push_cluster_needs_no_ssh_settings_and_its_snapshot_is_refused_clearly(cluster, bob):
    cluster_update(cluster=cluster, source="push")
    incident = incident_open(cluster=cluster, title="stuck", opened_by=bob)
    with pytest.raises(SnapshotRefused, match="push cluster"):
        snapshot_create(incident=incident, by=bob)
    assert not incident.snapshots.exists()


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
