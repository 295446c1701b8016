"""A finished node's parse made ahead of its store, in the batch task's own thread while its
other visits are out (`nodeparse.Ahead`, `node_work.node_result_prepare`): the store writes it
as made only when everything it was made from still holds, so what is stored is what the store
would have made itself."""

from __future__ import annotations

import pytest

from analysis.evidence import NodeEvidence
from collectors import nodeparse
from collectors.models import NodeParseRecord, Snapshot
from incidents.services import incident_open

pytestmark = pytest.mark.django_db


def _nccl(node: str, peer: str) -> NodeEvidence:
    """A node whose log has a line NCCL prefixed with another node's host name."""
    line = f"{peer}:4242:4242 [0] NCCL WARN NET/IB : Got completion with error 12\n"
    return NodeEvidence(node=node, hostname=f"{node}.hosts.example", logs={"/log/x.log": line})


def _snapshot(cluster, bob, names: list[str], status: str = "ok") -> Snapshot:
    incident = incident_open(cluster=cluster, title="ahead", opened_by=bob)
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, source="test")
    for name in names:
        snapshot.collections.create(node_name=name, address="(test)", status=status)
    return snapshot


def _nodes(snapshot: Snapshot, *evidence: NodeEvidence) -> list:
    pks = dict(snapshot.collections.values_list("node_name", "pk"))
    return [(pks[e.node], e.node, e) for e in evidence]


def _ahead(snapshot: Snapshot, nodes: list) -> dict:
    """Each node's parse made ahead, as an ok node's."""
    ahead, status = nodeparse.Ahead(), nodeparse.stored_status("ok", "")
    return {
        pk: ahead.make(
            snapshot_id=snapshot.pk, collection_id=pk, node=name, evidence=ev, status=status
        )
        for pk, name, ev in nodes
    }


def _stored(snapshot: Snapshot) -> dict[str, tuple[bytes, dict]]:
    records = NodeParseRecord.objects.filter(collection__snapshot=snapshot)
    return {
        r.collection.node_name: (
            bytes(r.compressed),
            nodeparse._read(r.pk, r.compressed).asked_hosts,
        )
        for r in records.select_related("collection")
    }


def test_a_parse_made_ahead_is_stored_byte_for_byte_as_the_store_makes_it(cluster, bob):
    snapshot = _snapshot(cluster, bob, ["n1", "n2"])
    nodes = _nodes(snapshot, _nccl("n1", "n2"), _nccl("n2", "n1"))
    nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=nodes)
    made_here = _stored(snapshot)
    made = _ahead(snapshot, nodes)
    nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=nodes, made=made)
    assert _stored(snapshot) == made_here
    # Stored as made: the very record the batch made ahead.
    assert {bytes(m.record.compressed) for m in made.values()} == {c for c, _ in made_here.values()}


def test_a_node_mapped_before_the_group_mate_it_names_is_made_again_at_the_store(cluster, bob):
    """n1's line names n2's host, not known yet when n1 was mapped (n2 finished after it): the
    group's store knows it, and so stores what a map of the whole group gives."""
    snapshot = _snapshot(cluster, bob, ["n1", "n2"])
    nodes = _nodes(snapshot, _nccl("n1", "n2.hosts.example"), _nccl("n2", "n1"))
    made = _ahead(snapshot, nodes)
    assert made[nodes[0][0]].asked_hosts == {"n2.hosts.example": "", "n2": "n2"}
    nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=nodes, made=made)
    stored = _stored(snapshot)
    assert stored["n1"][1] == {"n2.hosts.example": "n2"}
    _, _, ev1 = nodes[0]
    fresh = _snapshot(cluster, bob, ["n1", "n2"])
    nodeparse.node_parses_store(snapshot_id=fresh.pk, nodes=_nodes(fresh, ev1, nodes[1][2]))
    assert _stored(fresh)["n1"][1] == stored["n1"][1]


def test_a_parse_made_with_another_status_than_the_row_says_is_made_again(cluster, bob):
    snapshot = _snapshot(cluster, bob, ["n1"], status="failed")
    nodes = _nodes(snapshot, _nccl("n1", "n1"))
    made = _ahead(snapshot, nodes)  # made as an ok node
    nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=nodes, made=made)
    stored = _stored(snapshot)["n1"][0]
    assert stored != bytes(made[nodes[0][0]].record.compressed)
    nodeparse.node_parses_store(snapshot_id=snapshot.pk, nodes=nodes)
    assert _stored(snapshot)["n1"][0] == stored
