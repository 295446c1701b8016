"""A first verdict still being made when the last node comes in is dropped at its next step
(collectors/provisional.py): the parses it reads back and the merge go in slices, each one
asking whether the snapshot is still collecting, so it never takes the CPU the final verdict
needs for a verdict about to be replaced."""

from __future__ import annotations

import pytest

import analysis
from analysis import snapshot_parse
from collectors import node_work, nodeparse, provisional, services
from collectors.models import NodeCollection, NodeStatus, Snapshot
from incidents.models import TimelineEvent
from tests.collectors.test_node_parse import _one_pass, _snapshot, _still_collecting

pytestmark = pytest.mark.django_db


def test_the_read_back_asks_between_slices_and_stops_when_told(cluster, bob, monkeypatch):
    snapshot = _snapshot(cluster, bob)
    monkeypatch.setattr(nodeparse, "KEEP_GOING_EVERY", 1)
    asked = []

    def keep_going() -> bool:
        asked.append(True)
        return len(asked) < 3

    with pytest.raises(analysis.Abandoned, match="in the read-back"):
        nodeparse.snapshot_parses(snapshot, keep_going=keep_going)
    assert len(asked) == 3  # the third slice was never read
    asked.clear()
    merge = nodeparse.snapshot_parses(snapshot, keep_going=lambda: asked.append(True) or True)
    assert (merge.stored, len(asked)) == (4, 4)


@pytest.mark.parametrize(
    ("where", "module", "step", "steps_done"),
    [
        ("in the read-back", nodeparse, "_read", 2),
        ("in the merge", snapshot_parse, "_merge_node", 1),
    ],
)
def test_the_last_node_in_meanwhile_drops_the_first_verdict(
    cluster, bob, monkeypatch, caplog, where, module, step, steps_done
):
    snapshot = _snapshot(cluster, bob)
    _still_collecting(snapshot, ["lab-node-2"])
    assert provisional.provisional_past_deadline(snapshot_id=snapshot.pk)  # claimed
    monkeypatch.setattr(module, "KEEP_GOING_EVERY", 1)
    done_steps, real_step = [], getattr(module, step)

    def step_then_the_last_node_arrives(*args, **kwargs):
        done_steps.append(True)
        if len(done_steps) == steps_done:  # meanwhile, another process stores the last node
            NodeCollection.objects.filter(snapshot=snapshot).update(status=NodeStatus.OK)
            assert node_work.snapshot_finish_if_complete(snapshot_id=snapshot.pk)
        return real_step(*args, **kwargs)

    monkeypatch.setattr(module, step, step_then_the_last_node_arrives)
    with caplog.at_level("INFO", logger="collectors.provisional"):
        assert provisional.snapshot_provisional_analyse(snapshot_id=snapshot.pk) is None
    assert len(done_steps) == steps_done  # of the three nodes in: the rest never read/merged
    assert f"first verdict of snapshot {snapshot.pk} dropped {where}" in caplog.text
    assert Snapshot.objects.get(pk=snapshot.pk).provisional == {"state": "due"}  # none shown
    assert not TimelineEvent.objects.filter(
        incident=snapshot.incident, details__phase="provisional"
    ).exists()
    monkeypatch.setattr(module, step, real_step)
    done = services.snapshot_analyse(snapshot_id=snapshot.pk)
    assert done.provisional is None
    assert done.diagnosis == _one_pass(snapshot)
