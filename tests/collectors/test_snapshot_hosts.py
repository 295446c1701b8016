"""How lines spell a snapshot's nodes, kept by a worker process between its batches
(`collectors.snapshot_hosts`): the answers a batch's parse is given are the ones the whole
snapshot's rows give (`host_map` over them, in name order), without reading every node row of
the snapshot again for each batch."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from analysis.evidence import NodeEvidence
from analysis.signals.place import host_map
from collectors import nodeparse
from collectors.models import NodeParseRecord, Snapshot
from collectors.snapshot_hosts import Spellings
from incidents.services import incident_open

pytestmark = pytest.mark.django_db

PAIRS = [
    ("node-b", "gpu-7.cluster.local"),
    ("node-a", "gpu-7.other.site"),  # the same first label: node-a spells "gpu-7"
    ("node-c.rack1", ""),
    ("node-d", "node-c"),  # node-c's own first label names node-c.rack1 (first in order)
    ("node-e", "gpu-9"),
]


def test_the_spellings_are_host_map_over_the_rows_in_name_order():
    assert Spellings(PAIRS).nodes == host_map(sorted(PAIRS))
    spellings = Spellings(PAIRS[:2])
    for node, hostname in PAIRS[2:]:
        spellings.learn(node, hostname)
    assert spellings.nodes == host_map(sorted(PAIRS))
    spellings.learn("node-a", "gpu-3")  # visited again, another name: made again
    moved = [("node-a", "gpu-3"), *PAIRS[:1], *PAIRS[2:]]
    assert spellings.nodes == host_map(sorted(moved))


def _nccl(node: str, peer: str) -> NodeEvidence:
    """A node whose log has a line NCCL prefixed with another node's host name."""
    line = f"{peer}:4242:4242 [0] NCCL WARN NET/IB : Got completion with error 12\n"
    return NodeEvidence(node=node, hostname=f"{node}.hosts.example", logs={"/log/x.log": line})


def _snapshot(cluster, bob, names: list[str]) -> Snapshot:
    incident = incident_open(cluster=cluster, title="spellings", opened_by=bob)
    snapshot = Snapshot.objects.create(incident=incident, cluster=cluster, source="test")
    for name in names:
        snapshot.collections.create(node_name=name, address="(test)", status="ok")
    return snapshot


def _store(snapshot: Snapshot, *evidence: NodeEvidence) -> None:
    pks = dict(snapshot.collections.values_list("node_name", "pk"))
    nodeparse.node_parses_store(
        snapshot_id=snapshot.pk, nodes=[(pks[e.node], e.node, e) for e in evidence]
    )


def _asked(snapshot: Snapshot, node: str) -> dict:
    record = NodeParseRecord.objects.get(collection__snapshot=snapshot, collection__node_name=node)
    return nodeparse._read(record.pk, record.compressed).asked_hosts


def _reads_every_row(queries) -> bool:
    return any("collectors_nodeparserecord" in q["sql"] and "LEFT OUTER JOIN" in q["sql"]
               for q in queries)  # fmt: skip


def test_a_later_batch_is_told_the_host_names_without_reading_every_row(cluster, bob):
    snapshot = _snapshot(cluster, bob, ["n1", "n2", "n3"])
    _store(snapshot, _nccl("n1", "n3"))
    with CaptureQueriesContext(connection) as queries:
        _store(snapshot, _nccl("n2", "n1.hosts.example"))  # named by its host name
    assert not _reads_every_row(queries.captured_queries)
    assert _asked(snapshot, "n2") == {"n1.hosts.example": "n1"}
    assert _asked(snapshot, "n1") == {"n3": "n3"}


def test_a_name_another_process_stored_is_read_from_the_database(cluster, bob):
    snapshot = _snapshot(cluster, bob, ["n1", "n2", "n3"])
    _store(snapshot, _nccl("n1", "n3"))
    # n3's parse stored by another worker process: this one was never told its host name.
    n3 = snapshot.collections.get(node_name="n3")
    NodeParseRecord.objects.create(
        collection=n3, version=0, hostname="n3.hosts.example", compressed=b"", size=0
    )
    with CaptureQueriesContext(connection) as queries:
        _store(snapshot, _nccl("n2", "n3.hosts.example"))
    assert _reads_every_row(queries.captured_queries)  # once, for the name it did not know
    assert _asked(snapshot, "n2") == {"n3.hosts.example": "n3"}
    with CaptureQueriesContext(connection) as queries:
        _store(snapshot, _nccl("n2", "elsewhere.example"))  # in no row: read once, then ""
    assert sum("LEFT OUTER JOIN" in q["sql"] for q in queries.captured_queries) == 1
    assert _asked(snapshot, "n2") == {"elsewhere.example": "", "elsewhere": ""}
