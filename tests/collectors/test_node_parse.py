"""Each node's parse stored as its evidence is stored, and the analysis merging the stored
parses: the same verdict as one pass over the stored evidence, whatever state the records
are in (missing, damaged, too big, of another version); and the provisional verdict made
while nodes are still out, then replaced by the final one."""

from __future__ import annotations

import json
import zlib
from datetime import timedelta

import pytest
from django.utils import timezone

import analysis
from analysis.evidence import NodeEvidence
from collectors import node_work, nodeparse, provisional, selectors, services
from collectors.models import (
    NodeCollection,
    NodeParseRecord,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
)
from hangdesk.masking import masked_diagnosis
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot, split_nodes

pytestmark = pytest.mark.django_db


def _snapshot(cluster, bob, scenario: str = "outside", per_node: int = 1) -> Snapshot:
    """A four-node snapshot whose nodes' evidence went in the way a worker stores it."""
    evidence = split_nodes(load_snapshot(scenario), ranks_per_node=per_node)
    incident = incident_open(cluster=cluster, title=f"hung {scenario}", opened_by=bob)
    snapshot = services.snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)
    by_name = {n.node: n for n in evidence.nodes}
    for collection in snapshot.collections.all():
        node_work.node_evidence_store(collection=collection, evidence=by_name[collection.node_name])
    return snapshot


def _one_pass(snapshot: Snapshot) -> dict:
    return masked_diagnosis(analysis.diagnose(selectors.snapshot_evidence(snapshot)))


def test_each_stored_node_has_its_parse_and_the_merge_uses_them(cluster, bob):
    snapshot = _snapshot(cluster, bob)
    assert NodeParseRecord.objects.filter(collection__snapshot=snapshot).count() == 4
    merge = nodeparse.snapshot_parses(snapshot)
    assert (merge.stored, merge.parsed_here) == (4, 0)
    expected = _one_pass(snapshot)
    done = services.snapshot_analyse(snapshot_id=snapshot.pk)
    assert done.status == SnapshotStatus.DONE
    assert done.diagnosis == expected
    assert done.diagnosis["suspect_ranks"] == [3]


def _damage(record: NodeParseRecord, how: str) -> None:
    stored = json.loads(zlib.decompress(bytes(record.compressed)))
    if how == "garbage":
        record.compressed = b"not zlib at all"
    elif how == "version":
        record.version = 99
    elif how == "previous-version":
        # A parse stored by a worker of the version before (its lists of records as rows):
        # parsed again from the node's artifacts, never read in this version's layout.
        from analysis import nodemap

        record.version = stored["version"] = nodemap.NODE_PARSE_VERSION - 1
        record.compressed = zlib.compress(json.dumps(stored).encode())
    elif how == "field":
        stored["parse"][0] = ["a node name as a list"]
        record.compressed = zlib.compress(json.dumps(stored).encode())
    elif how == "huge":
        record.compressed = zlib.compress(b" " * (nodemap_bound() + 10))
    record.save()


def nodemap_bound() -> int:
    from analysis import nodemap

    return nodemap.MAX_STORED_BYTES


@pytest.mark.parametrize("how", ["garbage", "version", "previous-version", "field", "huge"])
def test_a_bad_record_is_parsed_again_from_the_artifacts(cluster, bob, how, monkeypatch):
    from analysis import nodemap

    monkeypatch.setattr(nodemap, "MAX_STORED_BYTES", 4 * 1024 * 1024)
    snapshot = _snapshot(cluster, bob)
    _damage(NodeParseRecord.objects.filter(collection__snapshot=snapshot).first(), how)
    merge = nodeparse.snapshot_parses(snapshot)
    assert (merge.stored, merge.parsed_here) == (3, 1)
    done = services.snapshot_analyse(snapshot_id=snapshot.pk)
    assert done.diagnosis == _one_pass(snapshot)


def test_a_bundle_without_records_is_parsed_by_the_merge(cluster, bob):
    evidence = split_nodes(load_snapshot("mismatch"), ranks_per_node=2)
    incident = incident_open(cluster=cluster, title="bundle", opened_by=bob)
    snapshot = services.snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)
    assert not NodeParseRecord.objects.filter(collection__snapshot=snapshot).exists()
    assert nodeparse.snapshot_parses(snapshot).parsed_here == 2
    done = services.snapshot_analyse(snapshot_id=snapshot.pk)
    assert done.diagnosis == _one_pass(snapshot)


def test_a_node_stored_again_replaces_its_parse(cluster, bob):
    snapshot = _snapshot(cluster, bob)
    collection = snapshot.collections.order_by("node_name").first()
    node_work.node_evidence_store(
        collection=collection, evidence=NodeEvidence(node=collection.node_name)
    )
    assert NodeParseRecord.objects.filter(collection=collection).count() == 1
    parse = nodeparse.snapshot_parses(snapshot).parses[0]
    assert parse.node == collection.node_name and parse.processes == []


def _still_collecting(snapshot: Snapshot, out: list[str]) -> None:
    """The snapshot as it stands while `out` are still being visited (for long: past the
    deadline of a first verdict, collectors/provisional.py)."""
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.RUNNING)
    NodeCollection.objects.filter(snapshot=snapshot, node_name__in=out).update(
        status=NodeStatus.RUNNING, started_at=timezone.now() - timedelta(minutes=5)
    )


def test_a_provisional_verdict_names_the_nodes_still_out(cluster, bob, client):
    snapshot = _snapshot(cluster, bob)
    _still_collecting(snapshot, ["lab-node-2"])
    # 3 of 4 is under 95 %: not yet; the deadline's rule does not wait for a share.
    assert not provisional.provisional_due(snapshot_id=snapshot.pk)
    assert provisional.provisional_past_deadline(snapshot_id=snapshot.pk)
    assert not provisional.provisional_past_deadline(snapshot_id=snapshot.pk)  # claimed once
    stored = provisional.snapshot_provisional_analyse(snapshot_id=snapshot.pk)
    assert stored["missing"] == ["lab-node-2"]
    shown = selectors.read_provisional(Snapshot.objects.get(pk=snapshot.pk))
    assert shown["label"] == "provisional: 3 of 4 nodes"
    # The node still out is evidence: named, its rank not seen; rank 3, stuck on a node that
    # is in, is the suspect already.
    assert shown["missing"] == ["lab-node-2"]
    assert shown["unobserved_ranks"] == [2], shown
    assert (shown["classification"], shown["suspect_ranks"]) == ("A", [3])
    client.force_login(bob)
    panel = client.get(f"/snapshots/{snapshot.pk}/progress/").content.decode()
    assert "provisional: 3 of 4 nodes" in panel and "Still out: lab-node-2" in panel

    # The last node comes in: the final verdict replaces the provisional one.
    NodeCollection.objects.filter(snapshot=snapshot).update(status=NodeStatus.OK)
    assert node_work.snapshot_finish_if_complete(snapshot_id=snapshot.pk)
    done = services.snapshot_analyse(snapshot_id=snapshot.pk)
    assert done.provisional is None
    assert selectors.read_provisional(done) is None
    assert done.diagnosis == _one_pass(snapshot)


def test_ninety_five_percent_in_is_due_once(cluster, bob):
    from clusters.services import node_create
    from tests.conftest import HOST_KEY

    for index in range(2, 20):
        node_create(
            cluster=cluster, name=f"gpu-{index}", address=f"127.0.9.{index + 1}", port=22,
            username="root", key_path="/etc/hangdesk/id_ed25519", host_key=HOST_KEY,
        )  # fmt: skip
    incident = incident_open(cluster=cluster, title="twenty", opened_by=bob)
    created = services.snapshot_create(incident=incident, by=bob)
    collections = list(created.snapshot.collections.order_by("node_name"))
    assert len(collections) == 20
    for collection in collections[:18]:
        NodeCollection.objects.filter(pk=collection.pk).update(status=NodeStatus.OK)
    assert not provisional.provisional_due(snapshot_id=created.snapshot.pk)  # 18 of 20
    NodeCollection.objects.filter(pk=collections[18].pk).update(status=NodeStatus.FAILED)
    assert provisional.provisional_due(snapshot_id=created.snapshot.pk)  # 19 of 20
    assert not provisional.provisional_due(snapshot_id=created.snapshot.pk)
