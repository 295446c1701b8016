"""One status rule: every conditional update of a snapshot's or a node's status goes through the
table of allowed moves, and a move the table does not allow changes no row."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from collectors.models import (
    ACTIVE_SNAPSHOT_STATUSES,
    FINISHED_NODE_STATUSES,
    NODE_FLOW,
    SNAPSHOT_FLOW,
    NodeCollection,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
)
from collectors.starts import snapshot_start
from incidents.services import incident_open

COLLECTORS = Path(__file__).resolve().parents[2] / "collectors"


def test_in_progress_and_final_statuses_follow_from_the_table():
    assert set(ACTIVE_SNAPSHOT_STATUSES) == {SnapshotStatus.RUNNING, SnapshotStatus.ANALYSING}
    assert set(SNAPSHOT_FLOW.finished) == {SnapshotStatus.DONE, SnapshotStatus.FAILED}
    assert set(FINISHED_NODE_STATUSES) == {NodeStatus.OK, NodeStatus.FAILED}
    assert set(NODE_FLOW.active) == {NodeStatus.PENDING, NodeStatus.RUNNING}


def test_nothing_moves_a_status_outside_the_rule():
    """No `.update(status=...)` in collectors/ but the rule's own (models.py)."""
    offenders = []
    for path in sorted(COLLECTORS.rglob("*.py")):
        if path.name == "models.py" or "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and any(k.arg == "status" for k in node.keywords)
            ):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


@pytest.mark.django_db
def test_a_finished_snapshot_or_node_does_not_move_again(bob, cluster):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    snapshot, _ = snapshot_start(incident=incident, by=bob)
    rows = Snapshot.objects.filter(pk=snapshot.pk)
    assert SNAPSHOT_FLOW.move(rows, SnapshotStatus.DONE) == 0  # running: not analysed yet
    assert SNAPSHOT_FLOW.move(rows, SnapshotStatus.ANALYSING) == 1
    assert SNAPSHOT_FLOW.move(rows, SnapshotStatus.ANALYSING) == 0  # exactly once
    assert SNAPSHOT_FLOW.move(rows, SnapshotStatus.FAILED, error="x") == 1
    assert SNAPSHOT_FLOW.move(rows, SnapshotStatus.DONE) == 0
    nodes = NodeCollection.objects.filter(snapshot=snapshot)
    assert NODE_FLOW.move(nodes, NodeStatus.OK) == 0  # pending: never claimed
    assert NODE_FLOW.move(nodes, NodeStatus.RUNNING, task_id="t") == 2
    assert NODE_FLOW.move(nodes, NodeStatus.OK) == 2
    assert NODE_FLOW.move(nodes, NodeStatus.RUNNING, task_id="t") == 0
    with pytest.raises(ValueError, match="no status moves to 'pending'"):
        NODE_FLOW.move(nodes, NodeStatus.PENDING)
