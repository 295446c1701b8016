"""A first verdict before the last node: when 95 % of a snapshot's nodes are in, or when the
slowest are past the deadline the time budget gives a visit, the nodes that are in are
merged (their stored parses, collectors/nodeparse.py) with each node still out as a node that
gave nothing yet, and the verdict is stored as provisional, naming what is missing. The
final verdict replaces it (services._snapshot_finish clears it).

The nodes still out are evidence themselves: the analysis reads them as nodes without
evidence, and the provisional verdict names them.
"""

from __future__ import annotations

import logging
import math

from django.db.models import Count, Q
from django.utils import timezone

import analysis
from hangdesk.masking import masked_diagnosis
from incidents.models import EventKind
from incidents.services import timeline_event_record

from . import nodeparse, selectors
from .models import FINISHED_NODE_STATUSES, NodeCollection, Snapshot, SnapshotStatus

log = logging.getLogger(__name__)

# The share of nodes in that is worth a first verdict.
PROVISIONAL_SHARE = 0.95
# A provisional verdict names this many of the nodes still out; the count says the rest.
NAMED_MISSING = 50
_DUE = {"state": "due"}
VERDICT_KEYS = ("classification", "confidence", "summary", "suspect_ranks", "suspect_nodes",
                "missing_ranks", "unobserved_ranks", "rule")  # fmt: skip


def provisional_due(*, snapshot_id: int) -> bool:
    """After a node is in: is this the moment for the snapshot's first verdict (95 % in, at
    least one still out, none made yet)? True for the one caller that claims it."""
    counts = NodeCollection.objects.filter(snapshot_id=snapshot_id).aggregate(
        total=Count("pk"), finished=Count("pk", filter=Q(status__in=FINISHED_NODE_STATUSES))
    )
    total, finished = counts["total"], counts["finished"]
    if not total or finished >= total or finished < math.ceil(PROVISIONAL_SHARE * total):
        return False
    return _claim(snapshot_id)


def provisional_past_deadline(*, snapshot_id: int) -> bool:
    """At the visit deadline: claim a first verdict when some nodes are in and some out."""
    finished = NodeCollection.objects.filter(
        snapshot_id=snapshot_id, status__in=FINISHED_NODE_STATUSES
    )
    unfinished = NodeCollection.objects.filter(snapshot_id=snapshot_id).exclude(
        status__in=FINISHED_NODE_STATUSES
    )
    if not (finished.exists() and unfinished.exists()):
        return False
    return _claim(snapshot_id)


def _claim(snapshot_id: int) -> bool:
    return bool(
        Snapshot.objects.filter(
            pk=snapshot_id, status=SnapshotStatus.RUNNING, provisional__isnull=True
        ).update(provisional=_DUE)
    )


def snapshot_provisional_analyse(*, snapshot_id: int) -> dict | None:
    """Diagnose what is in and store it as the snapshot's provisional verdict (while it is
    still collecting: a final verdict is never overwritten); what was stored, or None."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status != SnapshotStatus.RUNNING:
        return None
    rows = list(snapshot.collections.order_by("node_name").values_list("node_name", "status"))
    out = [name for name, status in rows if status not in FINISHED_NODE_STATUSES]
    if not out:
        return None
    previous = selectors.previous_snapshot(snapshot)
    previous_evidence = selectors.snapshot_evidence(previous) if previous else None
    try:
        merge = nodeparse.snapshot_parses(snapshot, still_out=out)
        if not Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).exists():
            return None  # the last node came in meanwhile: the final verdict is being made
        diagnosis = analysis.diagnose_parses(
            merge.head, merge.parses, merge.reparse, previous=previous_evidence
        )
    except Exception:  # a first verdict is a bonus: the final one still comes
        log.exception("provisional analysis of snapshot %s failed", snapshot_id)
        return None
    masked = masked_diagnosis(diagnosis)
    # The verdict's head only: the progress panel reads it every second while collecting.
    stored = {
        "verdict": {key: masked.get(key) for key in VERDICT_KEYS},
        "nodes_in": len(rows) - len(out),
        "nodes_total": len(rows),
        "missing": out[:NAMED_MISSING],
        "missing_count": len(out),
        "at": timezone.now().isoformat(),
    }
    moved = Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).update(
        provisional=stored
    )
    if not moved:
        return None
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SNAPSHOT,
        summary=f"Snapshot {snapshot_id}: provisional verdict, "
        f"{selectors.provisional_label(stored)}: {masked.get('summary')}",
        source="worker",
        details={
            "snapshot": snapshot_id,
            "phase": "provisional",
            "nodes_in": stored["nodes_in"],
            "nodes_total": stored["nodes_total"],
            "classification": diagnosis.classification,
        },
    )
    return stored
