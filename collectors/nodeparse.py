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

from analysis import nodemap
from analysis.diagnosis import no_cyclic_gc
from analysis.evidence import EvidenceStatus, NodeEvidence, SnapshotEvidence, not_gathered
from analysis.nodemap import NodeParse
from analysis.schedulers.attach import scheduler_log, scheduler_ranks
from analysis.signals.place import host_map
from analysis.snapshot_parse import Abandoned, Reparse
from hangdesk import evidence_kinds as kinds
from hangdesk.artifacts import artifacts_from_evidence, evidence_from_artifacts

from . import gpumetrics, snapshot_hosts
from .models import (
    Artifact,
    NodeCollection,
    NodeParseRecord,
    NodeStatus,
    Snapshot,
    inflate,
    inflate_at_most,
)

log = logging.getLogger(__name__)

# One node's parse, compressed: past this it is not stored (the merge parses the node again).
MAX_COMPRESSED_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Made:
    """One node's parse made before its store (`Ahead`), with what it was made from: used by
    the store only when all of that still holds there, else the node is mapped again."""

    node: str
    hostname: str  # as read back from its artifacts
    status: EvidenceStatus
    made_with: tuple  # the snapshot's fields the map reads (`_made_with`)
    asked_hosts: dict[str, str] | None  # the spellings it was given (None: all of them)
    record: NodeParseRecord | None  # None: its parse failed or is too big (not stored)


def node_parses_store(
    *,
    snapshot_id: int,
    nodes: list[tuple[int, str, NodeEvidence]],
    made: dict[int, Made] | None = None,
) -> int:
    """Parse nodes' evidence, (collection id, node name, evidence) each, as the analysis would
    read it back from their artifacts, and store the parses (replacing any); a parse that
    fails or is too big is not stored (the merge parses that node itself). `made`: parses
    made ahead (`Ahead`), by collection id: each stored as made when the node's status, the
    snapshot and every spelling it was given are still what this map would give it, else made
    again here (so what is stored is the same either way). Never raises for the evidence: the
    nodes' own results are stored already. Returns the bytes stored."""
    if not nodes:
        return 0
    made = made or {}
    snapshot = Snapshot.objects.select_related("cluster").get(pk=snapshot_id)
    mine = NodeCollection.objects.filter(snapshot_id=snapshot_id, pk__in=[pk for pk, _, _ in nodes])
    rows = mine.values_list("pk", "status", "reason")
    status = {pk: stored_status(st, why) for pk, st, why in rows}
    with_now = _made_with(snapshot)
    # (pk, node, hostname, evidence, read back: None when its parse made ahead holds so far)
    read_back: list[tuple[int, str, str, NodeEvidence, NodeEvidence | None]] = []
    for pk, name, evidence in nodes:
        ahead = made.get(pk)
        state = status.get(pk, EvidenceStatus())
        if ahead is not None and ahead.status == state and ahead.made_with == with_now:
            read_back.append((pk, ahead.node, ahead.hostname, evidence, None))
        else:
            node_ev = _read_back(name, evidence, state)
            read_back.append((pk, node_ev.node, node_ev.hostname, evidence, node_ev))
    hosts = snapshot_hosts.of(snapshot, [(node, host) for _, node, host, _, _ in read_back])
    records, stored = [], 0
    for pk, node, _, evidence, node_ev in read_back:
        if node_ev is None:
            ahead = made[pk]
            if _answers_hold(ahead.asked_hosts, hosts):
                record = ahead.record
            else:  # a spelling it was given has moved since: made again, as without it
                node_ev = _read_back(node, evidence, status.get(pk))
        if node_ev is not None:
            record = _record(snapshot, pk, node_ev, hosts)[1]
        if record is not None:
            stored += len(record.compressed)
            records.append(record)
    with transaction.atomic():
        NodeParseRecord.objects.filter(collection_id__in=[pk for pk, *_ in read_back]).delete()
        NodeParseRecord.objects.bulk_create(records)
    return stored


class Ahead:
    """The map of a batch's nodes made as they finish, before their store (collectors/fanout.py:
    in the task's own thread, while it waits on the visits still out), so the store that
    commits the last node only checks and writes. Reads the database (the snapshot once, the
    spellings as `snapshot_hosts` does: at most once a group) but never writes it."""

    def __init__(self) -> None:
        self._snapshots: dict[int, Snapshot] = {}
        self._hosts: dict[int, snapshot_hosts.SnapshotHosts] = {}

    def make(
        self, *, snapshot_id: int, collection_id: int, node: str, evidence: NodeEvidence,
        status: EvidenceStatus, pieces: list[tuple[str, bytes, bool]] | None = None,
    ) -> Made | None:  # fmt: skip
        """The node's parse as `node_parses_store` would make it with `status`; None when
        even that cannot be made here (the store maps the node itself). `pieces`: the
        evidence's artifacts (`artifacts_from_evidence`) when the caller has them already."""
        try:
            snapshot = self._snapshots.get(snapshot_id)
            if snapshot is None:
                snapshot = Snapshot.objects.select_related("cluster").get(pk=snapshot_id)
                self._snapshots[snapshot_id] = snapshot
            node_ev = _read_back(node, evidence, status, pieces)
            hosts = self._hosts.get(snapshot_id)
            if hosts is None:
                hosts = self._hosts[snapshot_id] = snapshot_hosts.of(snapshot, [])
            hosts.learn(node_ev.node, node_ev.hostname)
            asked, record = _record(snapshot, collection_id, node_ev, hosts)
        except Exception:  # never the batch's failure: the store maps this node again
            log.exception("mapping %s ahead of its store failed", node)
            return None
        return Made(node_ev.node, node_ev.hostname, status, _made_with(snapshot), asked, record)

    def stored(self) -> None:
        """A group was stored: the next group's spellings start from the process's again."""
        self._hosts.clear()


def _made_with(snapshot: Snapshot) -> tuple:
    return (snapshot.collected_at, snapshot.started_at, snapshot.scheduler)


def _answers_hold(asked: dict[str, str] | None, hosts) -> bool:
    # As `nodemap.still_holds` reads them: a spelling it was not given was answered "".
    return asked is not None and all(hosts.get(h, "") == n for h, n in asked.items())


def _read_back(
    name: str, evidence: NodeEvidence, status: EvidenceStatus | None, pieces: list | None = None
) -> NodeEvidence:
    """The node's evidence as the analysis reads it back from its stored artifacts (`pieces`:
    `artifacts_from_evidence(evidence)`, when made already)."""
    pieces = artifacts_from_evidence(evidence) if pieces is None else pieces
    return evidence_from_artifacts(
        name,
        ((n[:1024], content, cut) for n, content, cut in pieces),
        status=status or EvidenceStatus(),
    )


def _record(
    snapshot: Snapshot, pk: int, node_ev: NodeEvidence, hosts
) -> tuple[dict[str, str] | None, NodeParseRecord | None]:
    """The spellings the node's map asked for and its record (None: failed or too big)."""
    try:
        parse = _map(snapshot, node_ev, hosts)
        raw = json.dumps(nodemap.to_json(parse), separators=(",", ":")).encode()
    except Exception:  # a parser's bug must not lose the node: the merge parses it again
        log.exception("parsing %s's evidence failed", node_ev.node)
        return None, None
    compressed = zlib.compress(raw, 1)
    if len(compressed) > MAX_COMPRESSED_BYTES or len(raw) > nodemap.MAX_STORED_BYTES:
        return parse.asked_hosts, None
    record = NodeParseRecord(
        collection_id=pk,
        version=nodemap.NODE_PARSE_VERSION,
        hostname=node_ev.hostname[:255],
        compressed=compressed,
        size=len(raw),
    )
    return parse.asked_hosts, record


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


# Parses read back ahead of the merge (collectors/read_ahead.py): by collection id, the record
# read (its id: a node's parse stored again is a new record) and its parse.
Held = dict[int, tuple[int, NodeParse]]


def snapshot_parses(
    snapshot: Snapshot,
    *,
    still_out: Iterable[str] = (),
    compared: bool = False,
    keep_going: Callable[[], bool] | None = None,
    held: Held | None = None,
) -> MergeInput:
    """Every node's parse, in node order, for `analysis.diagnose_parses`: its stored one,
    else parsed here from its artifacts. `still_out`: nodes a provisional verdict is made
    without, each as a node that gave nothing yet. `compared`: an earlier snapshot's, as a
    later one is compared with it (`parse_snapshot(evidence, flight_recorder=False)`): a node
    parsed here reads no dumps and no scheduler lines (the merge, told so, drops the stored
    parses' dumps, and parses again a node whose parse read the scheduler's lines).
    `keep_going`: asked between slices of the read back; False raises `analysis.Abandoned`
    (a first verdict whose last node came in meanwhile). `held`: parses read back already, each
    used while its node's record is still the one it was read from."""
    out = set(still_out)
    rows = _rows(snapshot, held) if held is not None else list(
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
    gpumetrics.series_onto(
        {nodes[i][0]: p for i, p in enumerate(parses) if p is not None}, snapshot_id=snapshot.pk
    )
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


def _rows(snapshot: Snapshot, held: Held) -> list[tuple]:
    """`snapshot_parses`' rows with a held parse in place of the compressed record it was read
    from (that record still the node's), the others' records fetched by id (few: those stored
    since the last read ahead)."""
    rows = list(
        NodeCollection.objects.filter(snapshot_id=snapshot.pk)
        .order_by("node_name")
        .values_list("pk", "node_name", "status", "reason", "parse_record__version",
                     "parse_record__pk")
    )  # fmt: skip
    fetch = [record for pk, *_, record in rows if record and held.get(pk, (0,))[0] != record]
    compressed = {}
    for start in range(0, len(fetch), 900):  # under SQLite's bound on a query's parameters
        chunk = NodeParseRecord.objects.filter(pk__in=fetch[start : start + 900])
        compressed.update(chunk.values_list("pk", "compressed"))
    out = []
    for pk, name, status, reason, version, record in rows:
        kept = held.get(pk)
        form = kept[1] if kept is not None and kept[0] == record else compressed.get(record)
        out.append((pk, name, status, reason, version, form))
    return out


def parses_read_since(snapshot_id: int, after: int) -> list[tuple[int, int, NodeParse | None]]:
    """The snapshot's node parses stored after record `after`, read back: (collection id,
    record id, parse or None when not usable), by record id."""
    records = (
        NodeParseRecord.objects.filter(collection__snapshot_id=snapshot_id, pk__gt=after)
        .order_by("pk").values_list("collection_id", "pk", "version", "compressed")
    )  # fmt: skip
    with no_cyclic_gc():
        return [
            (collection, pk, _read(collection, form) if version == nodemap.NODE_PARSE_VERSION
             else None)
            for collection, pk, version, form in records
        ]  # fmt: skip


def _read_all(rows, out: set[str], parses: list, nodes: list, keep_going=None) -> None:
    for index, (pk, name, status, reason, version, form) in enumerate(rows):
        if keep_going is not None and index % KEEP_GOING_EVERY == 0 and not keep_going():
            raise Abandoned("in the read-back")
        evidence_status = stored_status(status, reason)
        nodes.append((pk, name, evidence_status))
        parse = None
        if name not in out and version == nodemap.NODE_PARSE_VERSION and form is not None:
            # A held parse (read ahead) as it is, else the stored record read back.
            parse = form if isinstance(form, NodeParse) else _read(pk, form)
        if parse is not None:
            parse.status = evidence_status  # as the node's row says now
        parses.append(parse)


def still_out_note() -> str:
    return "still out: the snapshot's verdict is provisional until this node is in"


def stored_status(status: str, reason: str) -> EvidenceStatus:
    # As NodeCollection.evidence_status says it, from the row's two columns.
    if status == NodeStatus.OK:
        return EvidenceStatus(True, reason)
    return EvidenceStatus(False, reason or f"no evidence ({status})")


def _read(pk: int, compressed: bytes | memoryview) -> NodeParse | None:
    """A stored parse, or None (logged) when it is too big, damaged or of another shape."""
    try:
        raw = inflate_at_most(compressed, nodemap.MAX_STORED_BYTES)
        return nodemap.from_json(json.loads(raw))
    except (zlib.error, ValueError, RecursionError) as exc:  # CodecError is a ValueError too
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
