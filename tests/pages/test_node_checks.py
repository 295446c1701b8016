"""Node checks on a worker: the key file where the worker looks for it, and the collector's
SSH handshake against a real OpenSSH server."""

import re

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

    good = check_connection(_node(cluster, sshd).ssh_target().to_json())
    assert good.ok is True and "login accepted" in good.text
    other_key = sshd.client_key.public_line  # a key, but not the host's
    wrong_key = _node(cluster, sshd, name="check-1", host_key=other_key)
    wrong = check_connection(wrong_key.ssh_target().to_json())
    assert wrong.ok is False and wrong.text.startswith("host key mismatch")
    closed = check_connection(_node(cluster, sshd, name="check-2", port=1).ssh_target().to_json())
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


@pytest.mark.django_db
def test_an_added_or_changed_node_is_checked_in_the_background_and_listed_with_its_state(
    as_user,
    alice,
    cluster,
    sshd,  # noqa: F811
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    """Issue 19: a wrong host key or an unreachable address used to be saved with "added"
    and nothing showed it until a snapshot failed."""
    from clusters import services
    from collectors import tasks

    queued = []
    monkeypatch.setattr(tasks.node_check_record, "delay", queued.append)
    target = sshd.target()
    fields = {
        "address": target.address,
        "port": target.port,
        "username": target.username,
        "key_path": target.key_path,
        "host_key": target.host_key,
    }
    with django_capture_on_commit_callbacks(execute=True):
        good = services.node_create(cluster=cluster, name="good", **fields)
        wrong = services.node_create(
            cluster=cluster, name="wrong", **{**fields, "host_key": sshd.client_key.public_line}
        )
    assert queued == [good.pk, wrong.pk]
    page = as_user(alice).get(f"/clusters/{cluster.name}/").content.decode()
    for name in ("good", "wrong"):
        row = rf"<td>{name}</td>\s*<td id=\"node-state-\d+\" class=\"node-check checking\""
        assert re.search(row, page), name
    assert 'hx-trigger="every 2s"' in page

    for pk in queued:  # what the worker does
        tasks.node_check_record(pk)
    Node.objects.exclude(pk__in=queued).delete()  # the fixture's own nodes, never checked here
    page = as_user(alice).get(f"/clusters/{cluster.name}/node-states/").content.decode()
    assert "<strong>connects</strong>" in page
    assert "<strong>fails</strong>" in page and "host key mismatch" in page
    assert "every 2s" not in page  # nothing runs: the list stops asking

    # Moved to a port nobody listens on: checked again, and it says so.
    with django_capture_on_commit_callbacks(execute=True):
        services.node_update(node=good, port=1)
    assert queued[-1] == good.pk
    good.refresh_from_db()
    assert good.check_state == "checking"
    tasks.node_check_record(good.pk)
    good.refresh_from_db()
    assert good.check_state == "failed" and "connection refused" in good.check_text
    # A rename is no new way to reach it: no new check.
    with django_capture_on_commit_callbacks(execute=True):
        services.node_update(node=good, name="renamed")
    assert queued.count(good.pk) == 2


@pytest.mark.django_db
def test_an_answer_for_a_node_that_changed_meanwhile_is_not_kept(cluster, sshd):  # noqa: F811
    from clusters.services import node_check_record

    node = _node(cluster, sshd)
    checked = node.ssh_target().to_json()
    Node.objects.filter(pk=node.pk).update(port=2, check_state="checking")
    assert not node_check_record(node_pk=node.pk, spec=checked, state="ok", text="fine")
    node.refresh_from_db()
    assert node.check_state == "checking"
