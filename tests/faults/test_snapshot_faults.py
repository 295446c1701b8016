"""One snapshot of a cluster where almost every node is broken, through the real workers with
the production time budget: a node down, a node that accepts TCP and never sends an SSH
banner, a node that refuses our key, a node whose host key changed, a node that floods binary
noise instead of running the probe, and one healthy node whose log is megabytes of binary.

Must hold: each broken node gets a clear status naming its fault (and its kind on /metrics),
the healthy node is collected with its binary log cut to the tail cap and marked cut, the
snapshot finishes and is analysed once, nothing is stored twice, and the console serves the
incident while and after. The same faults one node at a time, without workers, are
tests/collectors/test_failures.py (refused, silent, handshake stall, wrong key, host key
mismatch), test_hostile_node.py (silent after the command, noise flood) and test_bounds.py
(a py-spy that never ends, huge logs, too much output)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading

import pytest
from django.urls import reverse

from clusters.importing import cluster_import
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from hangdesk.plan import CollectionPlan
from incidents.services import incident_open
from tests.collectors.conftest import keygen
from tests.helpers import free_port, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def mute_port():
    """Accepts every TCP connection and never says a word (no SSH banner)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept():
        with contextlib.suppress(OSError):
            while True:
                held.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


def test_a_snapshot_of_broken_nodes_finishes_with_a_clear_status_each(
    tmp_path, bob, client, sshd, ranks, mute_port, celery_worker_process
):
    plan = ranks.plan()
    binary = tmp_path / "logs"
    binary.mkdir()
    (binary / "rank0.log").write_bytes(os.urandom(4 * 1024 * 1024))  # 4 MiB of binary
    stranger, other_host = keygen(tmp_path / "stranger"), keygen(tmp_path / "other_host")
    good = sshd.target()
    base = {"address": "127.0.0.1", "port": good.port, "username": "root",
            "key_path": good.key_path, "host_key": good.host_key}  # fmt: skip
    sshd.behaviour_file.write_text("flood")
    nodes = [
        {**base, "name": "a-healthy"},
        {**base, "name": "b-down", "port": free_port()},
        {**base, "name": "c-no-banner", "port": mute_port},
        {**base, "name": "d-wrong-key", "key_path": str(stranger.private)},
        {**base, "name": "e-host-key-changed", "host_key": other_host.public_line},
        {**base, "name": "f-binary-flood", "port": sshd.hostile_port},
    ]
    cluster = cluster_import({
        "cluster": {"name": "broken", "process_pattern": plan.process_pattern,
                    "log_globs": [f"{binary}/*.log"], "pyspy_command": plan.pyspy_command,
                    "flight_recorder_globs": list(plan.flight_recorder_globs)},
        "nodes": nodes,
    }).cluster  # fmt: skip
    incident = incident_open(opened_by=bob, title="t", cluster=cluster)
    client.force_login(bob)
    page = reverse("pages:incident", args=[incident.pk])

    snapshot, _ = snapshot_start(incident=incident, by=bob)
    assert client.get(page).status_code == 200  # while collecting
    wait_for(
        lambda: (
            Snapshot.objects.get(pk=snapshot.pk).status
            in (SnapshotStatus.DONE, SnapshotStatus.FAILED)
        ),
        timeout=240,
        what="the snapshot to finish",
    )
    snapshot.refresh_from_db()
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    node = {c.node_name: c for c in NodeCollection.objects.filter(snapshot=snapshot)}
    assert node["a-healthy"].status == NodeStatus.OK
    expected = {
        "b-down": "unreachable: connection refused by 127.0.0.1:",
        "c-no-banner": "unreachable: no SSH banner from 127.0.0.1:",
        "d-wrong-key": "auth failed: root@d-wrong-key",
        "e-host-key-changed": "host key mismatch: expected SHA256:",
        "f-binary-flood": "probe failed: exit status None: not a probe, just noise",
    }
    for name, start in expected.items():
        assert node[name].status == NodeStatus.FAILED, name
        assert node[name].reason.startswith(start), (name, node[name].reason)
    assert node["b-down"].attempts == 2  # a network failure is retried once
    assert node["d-wrong-key"].attempts == 1  # the same key would fail again: no retry
    log = Artifact.objects.get(collection=node["a-healthy"], name__startswith="logs/")
    # The node sends its last 256 KiB; stored as text, each undecodable byte is U+FFFD.
    assert log.truncated and log.size <= 3 * CollectionPlan().tail_bytes
    for collection in node.values():  # each node's evidence stored once
        names = list(Artifact.objects.filter(collection=collection).values_list("name"))
        assert len(names) == len(set(names))
    assert snapshot.diagnosis  # analysed
    assert client.get(page).status_code == 200
    metrics = client.get(reverse("metrics")).content.decode()
    assert 'hangdesk_node_failures{kind="unreachable"} 2' in metrics
    assert 'hangdesk_node_failures{kind="host key"} 1' in metrics
    assert 'hangdesk_node_failures{kind="auth"} 1' in metrics
    assert 'hangdesk_node_failures{kind="probe"} 1' in metrics
