"""The analysis as map and reduce: each node's evidence parsed by the worker that collected it,
as it arrives, and stored (`NodeParseRecord`); the snapshot's analysis merges the stored
parses (`analysis.diagnose_parses`) instead of parsing every node after the last one.

A stored parse is read back as untrusted input: of this version only, bounded in size before
and after decompression, checked field by field (`analysis.codec`). A node without a usable
record (an imported bundle, a record from another version, a damaged one, one whose
assumptions no longer hold) is parsed again from its artifacts: nothing is lost, it is only
slower.
"""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.db import transaction

from analysis import codec, nodemap
from analysis.diagnosis import no_cyclic_gc
from analysis.evidence import EvidenceStatus, NodeEvidence, SnapshotEvidence, not_gathered
from analysis.nodemap import NodeParse
from analysis.schedulers.attach import scheduler_log, scheduler_ranks
from analysis.signals.place import host_map
from analysis.snapshot_parse import Abandoned, Reparse
from hangdesk import evidence_kinds as kinds
from hangdesk.artifacts import artifacts_from_evidence, evidence_from_artifacts

from . import gpumetrics, snapshot_hosts
from .models import Artifact, NodeCollection, NodeParseRecord, NodeStatus, Snapshot, inflate

log = logging.getLogger(__name__)

# One node's parse, compressed: past this it is not stored (the merge parses the node again).
MAX_COMPRESSED_BYTES = 16 * 1024 * 1024


def node_parses_store(*, snapshot_id: int, nodes: list[tuple[int, str, NodeEvidence]]) -> int:
    """Parse nodes' evidence, (collection id, node name, evidence) each, as the analysis would
    read it back from their artifacts, and store the parses (replacing any); a parse that
    fails or is too big is not stored (the merge parses that node itself). Never raises for
    the evidence: the nodes' own results are stored already. Returns the bytes stored."""
    if not nodes:
        return 0
    snapshot = Snapshot.objects.select_related("cluster").get(pk=snapshot_id)
    mine = NodeCollection.objects.filter(snapshot_id=snapshot_id, pk__in=[pk for pk, _, _ in nodes])
    status = {pk: _status(st, why) for pk, st, why in mine.values_list("pk", "status", "reason")}
    read_back = []
    for pk, name, evidence in nodes:
        node_ev = evidence_from_artifacts(
            name,
            ((n[:1024], content, cut) for n, content, cut in artifacts_from_evidence(evidence)),
            status=status.get(pk, EvidenceStatus()),
        )
        read_back.append((pk, node_ev))
    hosts = snapshot_hosts.of(snapshot, [(ev.node, ev.hostname) for _, ev in read_back])
    records, stored = [], 0
    for pk, node_ev in read_back:
        try:
            parse = _map(snapshot, node_ev, hosts)
            raw = json.dumps(nodemap.to_json(parse), separators=(",", ":")).encode()
        except Exception:  # a parser's bug must not lose the node: the merge parses it again
            log.exception("parsing %s's evidence failed", node_ev.node)
            continue
        compressed = zlib.compress(raw, 1)
        if len(compressed) > MAX_COMPRESSED_BYTES or len(raw) > nodemap.MAX_STORED_BYTES:
            continue
        stored += len(compressed)
        version, hostname = nodemap.NODE_PARSE_VERSION, node_ev.hostname[:255]
        records.append(
            NodeParseRecord(
                collection_id=pk,
                version=version,
                hostname=hostname,
                compressed=compressed,
                size=len(raw),
            )
        )
    with transaction.atomic():
        NodeParseRecord.objects.filter(collection_id__in=[pk for pk, _ in read_back]).delete()
        NodeParseRecord.objects.bulk_create(records)
    return stored


def _head(snapshot: Snapshot) -> SnapshotEvidence:
    return SnapshotEvidence(
        nodes=[],
        expected_world_size=snapshot.expected_world_size,
        collected_at=snapshot.collected_at or snapshot.started_at,
        cluster=snapshot.cluster.name,
        scheduler=snapshot.scheduler,
    )


def _map(
    snapshot: Snapshot,
    node_ev: NodeEvidence,
    hosts: dict[str, str],
    rank_pids: dict[int, int] | None = None,
    step_summaries: bool = True,
    compared: bool = False,
) -> NodeParse:
    scheduler = snapshot.scheduler
    return nodemap.map_node(
        node_ev,
        hosts=hosts,
        snapshot_collected_at=snapshot.collected_at or snapshot.started_at,
        assigned=scheduler_ranks(scheduler, node_ev.node, node_ev.hostname),
        scheduler_log=None
        if compared
        else scheduler_log(scheduler, node_ev.node, node_ev.hostname),
        rank_pids=rank_pids,
        flight_recorder=not compared,
        step_summaries=step_summaries,
    )


@dataclass
class MergeInput:
    head: SnapshotEvidence
    parses: list[NodeParse]
    reparse: Reparse
    stored: int  # nodes whose stored parse was used
    parsed_here: int  # nodes parsed by the merge itself (no usable record)


# A slice of the stored parses read back between two asks of `keep_going` (~0.1 s of CPU).
KEEP_GOING_EVERY = 256


def snapshot_parses(
    snapshot: Snapshot,
    *,
    still_out: Iterable[str] = (),
    compared: bool = False,
    keep_going: Callable[[], bool] | None = None,
) -> MergeInput:
    """Every node's parse, in node order, for `analysis.diagnose_parses`: its stored one,
    else parsed here from its artifacts. `still_out`: nodes a provisional verdict is made
    without, each as a node that gave nothing yet. `compared`: an earlier snapshot's, as a
    later one is compared with it (`parse_snapshot(evidence, flight_recorder=False)`): a node
    parsed here reads no dumps and no scheduler lines (the merge, told so, drops the stored
    parses' dumps, and parses again a node whose parse read the scheduler's lines).
    `keep_going`: asked between slices of the read back; False raises `analysis.Abandoned`
    (a first verdict whose last node came in meanwhile)."""
    out = set(still_out)
    rows = list(
        NodeCollection.objects.filter(snapshot_id=snapshot.pk)
        .order_by("node_name")
        .values_list(
            "pk", "node_name", "status", "reason", "parse_record__version",
            "parse_record__compressed",
        )
    )  # fmt: skip
    parses: list[NodeParse | None] = []
    nodes: list[tuple[int, str, EvidenceStatus]] = []
    with no_cyclic_gc():  # hundreds of thousands of small records, none of them cyclic
        _read_all(rows, out, parses, nodes, keep_going)
    stored = sum(p is not None for p in parses)
    # Their GPUs' DCGM hour, stored after their parses were (a node parsed here reads it).
    gpumetrics.series_onto({nodes[i][0]: p for i, p in enumerate(parses) if p is not None})
    missing = [i for i, p in enumerate(parses) if p is None and nodes[i][1] not in out]
    evidence = _evidence(snapshot, [nodes[i][0] for i in missing], dumps=not compared)

    def node_evidence(index: int) -> NodeEvidence:
        pk, name, _ = nodes[index]
        if name in out:
            return NodeEvidence(node=name, status=not_gathered(still_out_note()))
        if pk not in evidence:
            evidence.update(_evidence(snapshot, [pk], dumps=not compared))
        return evidence[pk]

    # The host names of every node with evidence, as the one-pass analysis reads them.
    hosts_of = {i: node_evidence(i).hostname for i in missing}
    hosts = host_map(
        (name, hosts_of.get(i, parses[i].hostname if parses[i] else ""))
        for i, (_, name, _) in enumerate(nodes)
    )
    with no_cyclic_gc():  # the same kind of records, made here for the nodes without one
        for index, parse in enumerate(parses):
            if parse is None:
                parses[index] = _map(snapshot, node_evidence(index), hosts, compared=compared)

    def reparse(
        index: int, rank_pids: dict[int, int] | None, step_summaries: bool = True
    ) -> NodeParse:
        return _map(
            snapshot, node_evidence(index), hosts, rank_pids, step_summaries, compared=compared
        )

    return MergeInput(_head(snapshot), parses, reparse, stored, len(parses) - stored)


def _read_all(rows, out: set[str], parses: list, nodes: list, keep_going=None) -> None:
    for index, (pk, name, status, reason, version, compressed) in enumerate(rows):
        if keep_going is not None and index % KEEP_GOING_EVERY == 0 and not keep_going():
            raise Abandoned("in the read-back")
        evidence_status = _status(status, reason)
        nodes.append((pk, name, evidence_status))
        parse = None
        if name not in out and version == nodemap.NODE_PARSE_VERSION and compressed is not None:
            parse = _read(pk, compressed)
        if parse is not None:
            parse.status = evidence_status  # as the node's row says now
        parses.append(parse)


def still_out_note() -> str:
    return "still out: the snapshot's verdict is provisional until this node is in"


def _status(status: str, reason: str) -> EvidenceStatus:
    # As NodeCollection.evidence_status says it, from the row's two columns.
    if status == NodeStatus.OK:
        return EvidenceStatus(True, reason)
    return EvidenceStatus(False, reason or f"no evidence ({status})")


def _read(pk: int, compressed: bytes | memoryview) -> NodeParse | None:
    """A stored parse, or None (logged) when it is too big, damaged or of another shape."""
    try:
        inflater = zlib.decompressobj()
        raw = inflater.decompress(bytes(compressed), nodemap.MAX_STORED_BYTES + 1)
        if len(raw) > nodemap.MAX_STORED_BYTES or inflater.unconsumed_tail:
            raise codec.CodecError("over the size bound")
        return nodemap.from_json(json.loads(raw))
    except (zlib.error, ValueError, RecursionError) as exc:  # CodecError is a ValueError
        log.warning("stored parse of collection %s not used: %s", pk, exc)
        return None


def _evidence(snapshot: Snapshot, pks: list[int], dumps: bool = True) -> dict[int, NodeEvidence]:
    """The given nodes' evidence from their artifacts, in one query; `dumps=False`: without
    their flight-recorder dumps (most of a node's bytes at scale, each listing the world)."""
    if not pks:
        return {}
    collections = {c.pk: c for c in NodeCollection.objects.filter(pk__in=pks)}
    artifacts: dict[int, list] = {pk: [] for pk in pks}
    rows = Artifact.objects.filter(collection_id__in=pks)
    if not dumps:
        rows = rows.exclude(name__startswith=f"{kinds.FLIGHT_RECORDER.stored}/")
    rows = rows.values_list("collection_id", "name", "compressed", "truncated")
    for collection_id, name, compressed, truncated in rows.iterator(chunk_size=2000):
        artifacts[collection_id].append((name, inflate(compressed), truncated))
    return {
        pk: evidence_from_artifacts(
            collections[pk].node_name, artifacts[pk], status=collections[pk].evidence_status
        )
        for pk in pks
    }
