"""Snapshot reads: a fixed number of queries whatever the number of nodes or ranks."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

import analysis
from analysis import gpushape
from analysis.diagnosis import Diagnosis
from analysis.evidence import SnapshotEvidence
from analysis.rankview import RankOverview
from analysis.records import RankRow, RankStatus, read_when
from hangdesk.artifacts import evidence_from_artifacts
from hangdesk.masking import masked_diagnosis
from incidents.guided import Reasked, Standing, guided_state
from incidents.models import Incident
from readings import classes, guide, rank_timeline

from .models import (
    ACTIVE_SNAPSHOT_STATUSES,
    Artifact,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
    inflate,
)

# An earlier snapshot this recent is compared with the new one to tell slow from dead.
COMPARE_WITHIN = timedelta(minutes=30)


def active_snapshot(incident: Incident) -> Snapshot | None:
    return incident.snapshots.filter(status__in=ACTIVE_SNAPSHOT_STATUSES).first()


def latest_snapshot(incident: Incident) -> Snapshot | None:
    return incident.snapshots.order_by("-started_at", "-pk").first()


def previous_snapshot(snapshot: Snapshot) -> Snapshot | None:
    """The last analysed snapshot of the same incident whose evidence is older than this
    one's, by at most COMPARE_WITHIN (a re-imported copy of the same bundle is not older)."""
    when = snapshot.collected_at or snapshot.started_at
    return (
        Snapshot.objects.filter(incident_id=snapshot.incident_id, status=SnapshotStatus.DONE)
        .exclude(pk=snapshot.pk)
        .annotate(collected=Coalesce("collected_at", "started_at"))
        .filter(collected__lt=when, collected__gte=when - COMPARE_WITHIN)
        .order_by("-collected")
        .first()
    )


def node_counts(snapshot: Snapshot) -> dict[str, int]:
    return snapshot.collections.aggregate(
        total=Count("pk"),
        ok=Count("pk", filter=Q(status=NodeStatus.OK)),
        failed=Count("pk", filter=Q(status=NodeStatus.FAILED)),
        running=Count("pk", filter=Q(status=NodeStatus.RUNNING)),
        pending=Count("pk", filter=Q(status=NodeStatus.PENDING)),
    )


def snapshot_evidence(snapshot: Snapshot) -> SnapshotEvidence:
    """All stored artifacts of a snapshot as raw evidence, in two queries."""
    collections = list(snapshot.collections.order_by("node_name"))
    by_collection = defaultdict(list)
    artifacts = Artifact.objects.filter(collection__snapshot=snapshot).values_list(
        "collection_id", "name", "compressed", "truncated"
    )
    for collection_id, name, compressed, truncated in artifacts.iterator(chunk_size=2000):
        by_collection[collection_id].append((name, inflate(compressed), truncated))
    nodes = [
        evidence_from_artifacts(c.node_name, by_collection[c.pk], status=c.evidence_status)
        for c in collections
    ]
    return SnapshotEvidence(
        nodes=nodes,
        expected_world_size=snapshot.expected_world_size,
        collected_at=snapshot.collected_at or snapshot.started_at,
        cluster=snapshot.cluster.name,
        scheduler=snapshot.scheduler,
    )


def snapshot_reanalysed(snapshot: Snapshot) -> analysis.Diagnosis:
    """The snapshot's stored evidence analysed again by this version's engine, compared with
    the previous snapshot as the worker did; masked as a stored one is, and not stored."""
    previous = previous_snapshot(snapshot)
    previous_evidence = snapshot_evidence(previous) if previous else None
    diagnosis = analysis.diagnose(snapshot_evidence(snapshot), previous=previous_evidence)
    return Diagnosis.from_json(masked_diagnosis(diagnosis))


def provisional_label(stored: dict) -> str:
    """ "950 of 1,000 nodes": what a provisional verdict (collectors/provisional.py) rests on."""
    return f"{stored['nodes_in']:,} of {stored['nodes_total']:,} nodes"


def _has_diagnosis(snapshot: Snapshot) -> bool:
    """Without loading a deferred diagnosis (`for_pages()`): at 32,000 ranks it is megabytes,
    and the incident page fetched and dropped it on every view to ask this."""
    if "diagnosis" not in snapshot.get_deferred_fields():
        return bool(snapshot.diagnosis)
    known = snapshot.__dict__.get("has_diagnosis")
    if known is not None:
        return bool(known)
    return Snapshot.objects.filter(pk=snapshot.pk, diagnosis__isnull=False).exists()


def read_provisional(snapshot: Snapshot) -> dict | None:
    """The snapshot's provisional verdict as the progress panel and the API show it, or None
    (none made, being made, or the final verdict is in)."""
    stored = snapshot.provisional
    if not isinstance(stored, dict) or "verdict" not in stored or _has_diagnosis(snapshot):
        return None
    verdict = stored["verdict"] if isinstance(stored["verdict"], dict) else {}
    try:
        label = f"provisional: {provisional_label(stored)}"
    except (TypeError, ValueError, KeyError):
        return None
    missing = [m for m in stored.get("missing") or [] if isinstance(m, str)]
    count = stored.get("missing_count")
    return {
        "label": label,
        "nodes_in": stored["nodes_in"],
        "nodes_total": stored["nodes_total"],
        "missing": missing,
        "missing_more": max(0, count - len(missing)) if isinstance(count, int) else 0,
        "at": stored.get("at"),
        "classification": verdict.get("classification"),
        "summary": verdict.get("summary"),
        "suspect_ranks": verdict.get("suspect_ranks") or [],
        "suspect_nodes": verdict.get("suspect_nodes") or [],
        # The ranks of the nodes still out: not seen, so not yet judged.
        "unobserved_ranks": verdict.get("unobserved_ranks") or [],
    }


# Up to this many nodes the progress panel lists them all; above, only those not yet OK.
LIST_ALL_NODES_UP_TO = 16


@dataclass(frozen=True)
class ProgressPanel:
    """What the progress panel shows: counts, a percentage and the nodes worth a look."""

    snapshot: Snapshot
    counts: dict[str, int]
    percent: int
    collections: list
    ok_hidden: int  # the OK nodes not listed (0: all listed)
    provisional: dict | None  # a verdict before the last node (read_provisional)

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def progress(snapshot: Snapshot) -> ProgressPanel:
    """Two queries whatever the number of nodes."""
    counts = node_counts(snapshot)
    finished = counts["ok"] + counts["failed"]
    collections = snapshot.collections.order_by("status", "node_name")
    if counts["total"] > LIST_ALL_NODES_UP_TO:
        collections = collections.exclude(status=NodeStatus.OK)
    percent = round(100 * finished / counts["total"]) if counts["total"] else 100
    if snapshot.waits_for_uploads:  # a push snapshot: the nodes that sent, of those expected
        expected = snapshot.expected_nodes
        percent = min(100, round(100 * counts["total"] / expected)) if expected else 0
    return ProgressPanel(
        snapshot=snapshot,
        counts=counts,
        percent=percent,
        collections=list(collections),
        ok_hidden=counts["ok"] if counts["total"] > LIST_ALL_NODES_UP_TO else 0,
        provisional=read_provisional(snapshot),
    )


def artifact_summary(snapshot: Snapshot, *, node: str = "") -> dict:
    """Per node: its state, how many artifacts, their size and how many were cut (one query).
    Above LIST_ALL_NODES_UP_TO nodes only the nodes not OK and the one asked for are listed
    (4,000 rows were most of the page), with how many OK nodes are not."""
    collections = snapshot.collections.order_by("node_name")
    total = collections.count()
    if total > LIST_ALL_NODES_UP_TO:
        collections = collections.filter(~Q(status=NodeStatus.OK) | Q(node_name=node))
    rows = list(
        collections.values("node_name", "status", "reason")
        .annotate(
            artifact_count=Count("artifacts"),
            total_bytes=Sum("artifacts__size"),
            truncated_count=Count("artifacts", filter=Q(artifacts__truncated=True)),
        )
    )  # fmt: skip
    return {"rows": rows, "total": total, "hidden": total - len(rows)}


def artifact_index(snapshot: Snapshot, node: str) -> list[Artifact]:
    """One node's artifact names and sizes, without their content."""
    return list(
        Artifact.objects.filter(collection__snapshot=snapshot, collection__node_name=node)
        .defer("compressed")
        .order_by("name")
    )


def snapshot_bundle(snapshot: Snapshot, *, raw: bool = False) -> bytes:
    """The snapshot's evidence as a .tar.gz bundle (docs/bundle-format.md), its secrets
    masked (hangdesk/masking/) unless `raw`."""
    from hangdesk.masking import masked_snapshot

    from .bundles import write_bundle

    evidence = snapshot_evidence(snapshot)
    return write_bundle(
        evidence if raw else masked_snapshot(evidence),
        {"incident": snapshot.incident.reference, "snapshot": snapshot.pk, "masked": not raw},
    )


# Above this many ranks the per-rank table starts folded: the chart and the groups say more.
RANK_TABLE_OPEN_UP_TO = 64
# The per-rank table of a large job, a page at a time (snapshot_ranks).
RANK_PAGE_ROWS = 200


@dataclass(frozen=True)
class VerdictView:
    """Everything the diagnosis panel shows, from the stored diagnosis alone."""

    diagnosis: Diagnosis
    class_name: str
    choices: list[tuple[str, str]]  # the classes a responder may decide on (code, name)
    next_steps: list[str]
    questions: list[dict[str, str]]  # the decision's questions
    figure: dict  # the rank chart (plotly)
    gpu_strip: dict | None  # the GPU shape's strip
    ranks: RankOverview  # the per-rank table's stored overview
    rank_rows: list[RankRow]  # the rows shown first: suspects, then the missing, then by rank
    rank_pages: int
    rank_table_open: bool  # a small job's table starts open


def diagnosis_view(snapshot: Snapshot) -> VerdictView | None:
    """Everything the diagnosis panel shows, from the stored diagnosis alone (no re-analysis).
    A large job's table is not read whole: the stored overview has its counts, ranges, the
    chart's groups and the suspect and missing rows; every rank is a page at a time."""
    diagnosis = snapshot.read_diagnosis()
    if diagnosis is None:
        return None
    ranks = snapshot.read_rank_overview()
    # Suspects and absentees first: at 3 a.m. nobody scrolls to rank 3,071.
    rows = ranks.first_rows if ranks.complete else ranks.flagged_rows
    ordered = sorted(
        rows, key=lambda r: (not r.suspect, r.status is not RankStatus.MISSING, r.rank)
    )
    return VerdictView(
        diagnosis=diagnosis,
        class_name=guide.class_name(diagnosis.classification),
        choices=classes.choices(),
        next_steps=guide.next_steps(diagnosis),
        questions=guide.decision_questions(diagnosis),
        figure=rank_timeline.rank_timeline_figure(diagnosis, ranks),
        gpu_strip=gpushape.strip(diagnosis.gpu_shape),
        ranks=ranks,
        rank_rows=ordered,
        rank_pages=rank_page_count(ranks.total),
        rank_table_open=ranks.total <= RANK_TABLE_OPEN_UP_TO,
    )


def rank_page_count(total: int) -> int:
    return max(1, -(-total // RANK_PAGE_ROWS))


@dataclass(frozen=True)
class RankTablePage:
    """One page of the per-rank table in rank order (the rows for htmx, or a page of its own)."""

    snapshot: Snapshot
    rows: list[RankRow]
    page: int
    pages: int
    first: int  # the first row's index
    last: int
    total: int

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def rank_row(snapshot: Snapshot, rank: int) -> RankRow | None:
    """One rank's row of the verdict's table: from the rows the snapshot was read with (a
    page's: the overview's suspect, missing and first rows), else from the chunk holding it."""
    diagnosis = snapshot.read_diagnosis()
    row = diagnosis.rank_row(rank) if diagnosis else None
    if row is not None or diagnosis is None or "diagnosis" not in snapshot.get_deferred_fields():
        return row
    found = snapshot.rank_row_json(rank)
    return RankRow.from_json(found) if found else None


@dataclass(frozen=True)
class OffsetPage:
    """Rows [offset, offset + limit) of a list `total` long, and where its neighbours start."""

    rows: list
    offset: int
    limit: int
    total: int

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def previous_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


class RankRowsPage(OffsetPage):
    """A page of the per-rank table, in today's shape (typed, then as JSON)."""


def rank_rows_page(snapshot: Snapshot, offset: int, limit: int) -> RankRowsPage:
    """From the chunks of the table it falls in (one query); the length from the overview."""
    ranks = snapshot.read_rank_overview()
    total = ranks.total if ranks else 0
    stop = min(offset + limit, total)
    rows = snapshot.rank_rows(offset, stop) if offset < stop else []
    return RankRowsPage([RankRow.from_json(r).to_json() for r in rows], offset, limit, total)


def last_step_at(snapshot: Snapshot) -> datetime | None:
    """When any rank last wrote a step line: the latest stamp of the whole table (one query:
    its distinct stamps, stored with it, not the rows)."""
    stamps = [read_when(value) for value in snapshot.rank_field_values("last_step_at")]
    stamps = [stamp for stamp in stamps if stamp is not None]
    return max(stamps) if stamps else None


def rank_page(snapshot: Snapshot, page: int) -> RankTablePage:
    """One query whatever the number of ranks: the chunk(s) of the table it falls in."""
    ranks = snapshot.read_rank_overview()
    total = ranks.total if ranks else 0
    pages = rank_page_count(total)
    page = min(max(page, 1), pages)
    start = (page - 1) * RANK_PAGE_ROWS
    stop = min(start + RANK_PAGE_ROWS, total)
    return RankTablePage(
        snapshot=snapshot,
        rows=[RankRow.from_json(row) for row in snapshot.rank_rows(start, stop)],
        page=page,
        pages=pages,
        first=start,
        last=stop - 1,
        total=total,
    )


def latest_diagnosed_snapshot(
    incident: Incident, *, for_page: bool = False, keys_only: bool = False
) -> Snapshot | None:
    """The newest analysed snapshot; `for_page`: read as a page reads it (Snapshot.objects.
    for_pages(): the diagnosis without its per-rank table); `keys_only`: without the
    diagnosis at all (the live poll's keys need only which snapshot it is)."""
    snapshots = incident.snapshots.filter(status=SnapshotStatus.DONE, diagnosis__isnull=False)
    if for_page:
        snapshots = snapshots.for_pages()
    elif keys_only:
        snapshots = snapshots.defer("diagnosis")
    return snapshots.order_by("-started_at", "-pk").first()


def with_latest_verdict(incidents: QuerySet[Incident]) -> QuerySet[Incident]:
    """Each incident with `verdict`: its newest analysed snapshot's classification, as one
    subquery (no query per row)."""
    latest = Snapshot.objects.filter(incident=OuterRef("pk"), diagnosis__isnull=False).order_by(
        "-started_at", "-pk"
    )
    # The generated column, not `diagnosis -> 'classification'`: that decompresses the whole
    # diagnosis (12 MB at 32,000 ranks) for each incident listed.
    return incidents.annotate(verdict=Subquery(latest.values("classification")[:1]))


@dataclass(frozen=True)
class SnapshotPage:
    """Everything the snapshot page shows: its progress panel, its nodes and one node's
    artifacts, the verdict, and the responders' decision and answers standing on it (recorded
    on it, or carried from an earlier snapshot of the incident)."""

    snapshot: Snapshot
    counts: dict[str, int]
    percent: int
    collections: list
    ok_hidden: int
    provisional: dict | None  # a verdict before the last node (read_provisional)
    nodes: list[dict]
    node: str  # the node whose artifacts are listed ("" for none)
    artifacts: list[Artifact] | None
    view: VerdictView | None
    decision: Standing | Reasked | None
    answers: list[dict]

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def snapshot_page(snapshot: Snapshot, *, node: str = "") -> SnapshotPage:
    node = node[:200]
    diagnosis = snapshot.read_diagnosis()
    decision, answers = None, []
    if diagnosis:
        events = list(snapshot.incident.events.select_related("author").order_by("at", "pk"))
        state = guided_state(events, snapshot.pk, diagnosis)
        decision = state["call"]
        answers = [
            {"question": q["question"], "answer": state["answers"].get(q["id"])}
            for q in state["branch"]["questions"]
        ]
    return SnapshotPage(
        **progress(snapshot).context(),
        nodes=artifact_summary(snapshot, node=node),
        node=node,
        artifacts=artifact_index(snapshot, node) if node else None,
        view=diagnosis_view(snapshot),
        decision=decision,
        answers=answers,
    )
