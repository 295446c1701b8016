import json

import pytest
from django.core.management import CommandError, call_command

from clusters.importing import ImportRefused, cluster_import
from clusters.models import Cluster, Node
from tests.conftest import HOST_KEY

pytestmark = pytest.mark.django_db


def _lab_file(tmp_path, drop=(), **node_overrides):
    node = {
        "name": "lab-node-0",
        "address": "127.0.9.1",
        "port": 22,
        "username": "root",
        "key_path": "/tmp/lab/id_ed25519",
        "host_key": HOST_KEY,
        **node_overrides,
    }
    for key in drop:
        del node[key]
    data = {
        "cluster": {"name": "lab", "world_size": 4, "log_globs": ["/var/log/train/*.log"]},
        "nodes": [node],
        "scenario": "rank-exit",
    }
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(data))
    return path


def test_importing_twice_changes_nothing(tmp_path, capsys):
    path = _lab_file(tmp_path)
    call_command("cluster_import", path)
    call_command("cluster_import", path)
    output = capsys.readouterr().out
    assert "cluster lab created: 1 nodes added" in output
    assert "cluster lab updated: 0 nodes added, 0 updated, 1 unchanged" in output
    assert Node.objects.count() == 1
    assert Cluster.objects.get().expected_world_size == 4


def test_a_new_address_updates_the_node_in_place(tmp_path):
    call_command("cluster_import", _lab_file(tmp_path))
    call_command("cluster_import", _lab_file(tmp_path, address="127.0.9.7", port=2222))
    node = Node.objects.get()
    assert (node.address, node.port) == ("127.0.9.7", 2222)


def test_yaml_is_accepted(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(
        "cluster:\n  name: yaml-cluster\nnodes:\n"
        f"  - {{name: n1, address: gpu-1.example, host_key: '{HOST_KEY}'}}\n"
    )
    result = cluster_import(__import__("yaml").safe_load(path.read_text()))
    assert result.nodes_created == ["n1"]
    assert Node.objects.get().username == "root"


@pytest.mark.parametrize(
    ("drop", "overrides", "message"),
    [
        (("host_key",), {}, "has no 'host_key'"),
        ((), {"address": "bad host!"}, "is not a host"),
    ],
)
def test_a_bad_node_refuses_the_whole_file(tmp_path, drop, overrides, message):
    path = _lab_file(tmp_path, drop=drop, **overrides)
    with pytest.raises(CommandError, match=message):
        call_command("cluster_import", path)
    assert not Cluster.objects.exists()


def test_garbage_is_refused_clearly(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON/YAML"):
        call_command("cluster_import", path)
    with pytest.raises(ImportRefused, match="'cluster' must be an object"):
        cluster_import({"nodes": []})
