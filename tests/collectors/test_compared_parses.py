"""A later snapshot compared with the incident's earlier one made from the earlier one's own
stored node parses (`collectors.services.compared_snapshot`), not by parsing its artifacts
again: the same diagnosis, whole, as the earlier snapshot parsed from its evidence (today's
`analysis.diagnose(..., previous=evidence)`), with steps advanced between the two, without,
and with other processes since; an earlier node whose parse is of an older version or missing
is parsed from its artifacts, the rest are not parsed again."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

import analysis
from analysis import nodemap
from analysis.evidence import SnapshotEvidence
from collectors import node_work, nodeparse, selectors, services
from collectors.models import NodeParseRecord, Snapshot, SnapshotStatus
from hangdesk.masking import masked_diagnosis
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot, split_nodes

pytestmark = pytest.mark.django_db

# (earlier, later): steps advanced; a straggler; nothing moved; other processes since.
PAIRS = [
    (("healthy", "snap0"), ("healthy", "snap1")),
    (("straggler", "snap0"), ("straggler", "snap1")),
    (("outside", None), ("outside", None)),
    (("healthy", "snap1"), ("outside", None)),
]


def _evidence(scenario: str, snap: str | None, at=None) -> SnapshotEvidence:
    evidence = split_nodes(load_snapshot(scenario, snap), ranks_per_node=1)
    if at is None:
        return evidence
    nodes = [dataclasses.replace(n, collected_at=at) for n in evidence.nodes]
    return dataclasses.replace(evidence, nodes=nodes, collected_at=at)


def _stored(incident, evidence: SnapshotEvidence, bob) -> Snapshot:
    """A snapshot whose nodes' evidence went in as a worker stores it (parse included)."""
    snapshot = services.snapshot_store_bundle(incident=incident, evidence=evidence, by=bob)
    by_name = {n.node: n for n in evidence.nodes}
    for collection in snapshot.collections.all():
        node_work.node_evidence_store(collection=collection, evidence=by_name[collection.node_name])
    return snapshot


def _pair(cluster, bob, earlier_case, later_case) -> tuple[Snapshot, Snapshot]:
    incident = incident_open(cluster=cluster, title="two looks", opened_by=bob)
    later_ev = _evidence(*later_case)
    at = (later_ev.collected_at or later_ev.nodes[0].collected_at) - timedelta(minutes=2)
    earlier = _stored(incident, _evidence(*earlier_case, at=at), bob)
    assert services.snapshot_analyse(snapshot_id=earlier.pk).status == SnapshotStatus.DONE
    return earlier, _stored(incident, later_ev, bob)


def _todays(earlier: Snapshot, later: Snapshot) -> dict:
    """The diagnosis with the earlier snapshot parsed from its artifacts, as before."""
    return masked_diagnosis(
        analysis.diagnose(
            selectors.snapshot_evidence(later), previous=selectors.snapshot_evidence(earlier)
        )
    )


@pytest.fixture
def mapped(monkeypatch):
    """The snapshots whose nodes the analysis parses (`nodeparse._map`), one entry a node."""
    seen: list[int] = []
    original = nodeparse._map

    def spy(snapshot, *args, **kwargs):
        seen.append(snapshot.pk)
        return original(snapshot, *args, **kwargs)

    monkeypatch.setattr(nodeparse, "_map", spy)
    return seen


@pytest.mark.parametrize("earlier_case,later_case", PAIRS)
def test_compared_from_stored_parses_is_the_same_diagnosis(
    cluster, bob, mapped, earlier_case, later_case
):
    earlier, later = _pair(cluster, bob, earlier_case, later_case)
    assert selectors.previous_snapshot(later) == earlier
    expected = _todays(earlier, later)
    mapped.clear()
    done = services.snapshot_analyse(snapshot_id=later.pk)
    assert done.status == SnapshotStatus.DONE, done.error
    assert done.diagnosis == expected
    assert done.diagnosis["progress"]["method"] == "two_snapshots"
    assert earlier.pk not in mapped  # no earlier node parsed again


def test_the_pairs_differ_in_what_the_comparison_says(cluster, bob):
    """The cases above are not one case: steps advanced in one, not in another."""
    said = set()
    for earlier_case, later_case in PAIRS[:3]:
        earlier, later = _pair(cluster, bob, earlier_case, later_case)
        said.add(_todays(earlier, later)["progress"]["progressing"])
    assert {True, False} <= said


@pytest.mark.parametrize("earlier_case,later_case", [PAIRS[0], PAIRS[3]])
def test_earlier_parses_of_an_older_version_or_missing_are_parsed_from_artifacts(
    cluster, bob, mapped, earlier_case, later_case
):
    earlier, later = _pair(cluster, bob, earlier_case, later_case)
    records = list(NodeParseRecord.objects.filter(collection__snapshot=earlier).order_by("pk"))
    assert len(records) == 4
    records[0].version = nodemap.NODE_PARSE_VERSION - 1
    records[0].save()
    records[1].delete()
    expected = _todays(earlier, later)
    mapped.clear()
    done = services.snapshot_analyse(snapshot_id=later.pk)
    assert done.diagnosis == expected
    assert mapped.count(earlier.pk) == 2  # the two without a usable parse, only


def test_an_earlier_snapshot_without_stored_parses_is_the_same_diagnosis(cluster, bob):
    """A bundle's snapshot (no parses stored): every node parsed from its artifacts."""
    earlier, later = _pair(cluster, bob, *PAIRS[1])
    NodeParseRecord.objects.filter(collection__snapshot=earlier).delete()
    expected = _todays(earlier, later)
    assert services.snapshot_analyse(snapshot_id=later.pk).diagnosis == expected
