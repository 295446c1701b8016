"""Node checks on a worker: the key file where the worker looks for it, and the collector's
SSH handshake against a real OpenSSH server."""

import pytest

from clusters.models import Node
from collectors.connection import check_connection, key_file_problem
from tests.collectors.conftest import sshd  # noqa: F401  (the fixture)


def _node(cluster, sshd, **overrides) -> Node:  # noqa: F811
    target = sshd.target()
    fields = {
        "cluster": cluster,
        "name": "check-0",
        "address": target.address,
        "port": target.port,
        "username": target.username,
        "key_path": target.key_path,
        "host_key": target.host_key,
    } | overrides
    return Node.objects.create(**fields)


def test_key_file_problems_are_named(tmp_path):
    assert key_file_problem("") is None  # the ssh-agent
    assert key_file_problem(str(tmp_path / "nope")) == (
        f"the key file {tmp_path / 'nope'} does not exist on the worker"
    )
    assert key_file_problem(str(tmp_path)) == f"{tmp_path} is not a file"


@pytest.mark.django_db
def test_the_handshake_succeeds_on_a_good_node_and_names_what_fails(cluster, sshd):  # noqa: F811
    from collectors.connection import spec_of

    good = check_connection(spec_of(_node(cluster, sshd)))
    assert good.ok is True and "login accepted" in good.text
    other_key = sshd.client_key.public_line  # a key, but not the host's
    wrong = check_connection(spec_of(_node(cluster, sshd, name="check-1", host_key=other_key)))
    assert wrong.ok is False and wrong.text.startswith("host key mismatch")
    closed = check_connection(spec_of(_node(cluster, sshd, name="check-2", port=1)))
    assert closed.ok is False and closed.text.startswith("unreachable: connection refused")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_test_connection_asks_a_worker(as_user, alice, cluster, sshd, celery_worker_process):  # noqa: F811
    node = _node(cluster, sshd)
    client = as_user(alice)
    response = client.post(
        f"/clusters/{cluster.name}/nodes/{node.pk}/test/", HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert 'class="flash success"' in body, body
    assert "login accepted" in body
