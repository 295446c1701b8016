"""A first verdict before the last node: when 95 % of a snapshot's nodes are in, or when the
slowest are past a deadline its own visits set (`slow_deadline`), the nodes that are in are
merged (their stored parses, collectors/nodeparse.py) with each node still out as a node that
gave nothing yet, and the verdict is stored as provisional, naming what is missing. The
final verdict replaces it (services._snapshot_finish clears it).

The nodes still out are evidence themselves: the analysis reads them as nodes without
evidence, and the provisional verdict names them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from django.db.models import (
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    Max,
    Q,
    QuerySet,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

import analysis
from analysis.diagnosis import Diagnosis
from hangdesk.masking import mask_json
from incidents.models import EventKind
from incidents.services import timeline_event_record

from . import nodeparse, selectors, services
from .models import (
    FINISHED_NODE_STATUSES,
    NodeCollection,
    NodeStatus,
    Snapshot,
    SnapshotStatus,
)

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


# The slowest are past the deadline when every visit has started and each one still out has
# taken SLOW_FACTOR times the median visit of the nodes in (at least SLOW_FLOOR_S). Why not a
# fixed time from the click (it was one visit's budget, 60 s): on a loaded controller, or a
# fleet larger than the fan-out holds in flight, the nodes still out then are mostly not slow
# but queued, never started: a 4,000-node snapshot got its first verdict with a third of its
# nodes in, "A, no suspect", the rank it lost on a node not yet visited. The snapshot's own
# visits say what slow is on this controller under this load; 3x the median is well past a
# loaded visit's spread (the farm's: 1-6 s), and the floor keeps a fleet of sub-second visits
# from calling a one-second hiccup slow (it is the SSH connect timeout).
SLOW_FACTOR = 3.0
SLOW_FLOOR_S = 10.0


@dataclass(frozen=True)
class Deadline:
    due: bool  # the slowest are past it: a first verdict now
    recheck_s: float | None  # when to look again; None: never (finished, or claimed)

    def __bool__(self) -> bool:
        return self.due


def slow_deadline(*, snapshot_id: int, now: datetime | None = None) -> Deadline:
    """Are the nodes still out the slowest, past the deadline the snapshot's own visits set?
    When not yet, when to ask again (the newest visit still out reaches it). Two queries and
    the median's middle rows, none of them a row a node, in the ORM: `make run`'s SQLite
    runs it as PostgreSQL does."""
    now = now or timezone.now()
    nodes = NodeCollection.objects.filter(snapshot_id=snapshot_id)
    finished = Q(status__in=FINISHED_NODE_STATUSES)
    counts = nodes.aggregate(
        total=Count("pk"),
        done=Count("pk", filter=finished),
        pending=Count("pk", filter=Q(status=NodeStatus.PENDING)),
        newest_start=Max(Coalesce("started_at", Value(now, output_field=DateTimeField())),
                         filter=~finished),
    )  # fmt: skip
    total, done = counts["total"], counts["done"]
    if not total or done >= total:
        return Deadline(False, None)
    deadline_s = max(SLOW_FLOOR_S, SLOW_FACTOR * _median_visit_s(nodes.filter(finished)))
    if not done or counts["pending"]:
        return Deadline(False, deadline_s)  # nothing in yet, or visits still queued
    waited_s = (now - counts["newest_start"]).total_seconds()
    if waited_s >= deadline_s:
        return Deadline(True, None)
    return Deadline(False, max(1.0, deadline_s - waited_s))


def _median_visit_s(finished: QuerySet[NodeCollection]) -> float:
    """The median visit of the nodes in, in seconds (0 with none): the one or two middle
    visits read in the database's order, as percentile_cont(0.5) would give."""
    timed = finished.filter(finished_at__gte=F("started_at")).annotate(
        took=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    )
    count = timed.count()
    if not count:
        return 0.0
    middle = timed.order_by("took").values_list("took", flat=True)[
        (count - 1) // 2 : count // 2 + 1
    ]
    return sum(took.total_seconds() for took in middle) / len(middle)


def provisional_past_deadline(*, snapshot_id: int, now: datetime | None = None) -> Deadline:
    """The deadline's check: claims the first verdict when the slowest are past it (`due`:
    then the caller makes it), else says when to check again."""
    if not Snapshot.objects.filter(
        pk=snapshot_id, status=SnapshotStatus.RUNNING, provisional__isnull=True
    ).exists():
        return Deadline(False, None)  # finished, or a first verdict made or claimed
    deadline = slow_deadline(snapshot_id=snapshot_id, now=now)
    if deadline.due and not _claim(snapshot_id):
        return Deadline(False, None)
    return deadline


def _claim(snapshot_id: int) -> bool:
    return bool(
        Snapshot.objects.filter(
            pk=snapshot_id, status=SnapshotStatus.RUNNING, provisional__isnull=True
        ).update(provisional=_DUE)
    )


def masked_verdict(diagnosis: Diagnosis) -> dict:
    """The verdict's head only, masked (the progress panel reads it every second while
    collecting): its fields as `Diagnosis.to_json()` has them, without making and masking
    the whole per-rank table for them (0.2 s of CPU at 32,000 ranks, nodes still coming in)."""
    head = {key: getattr(diagnosis, key) for key in VERDICT_KEYS}
    return mask_json({key: list(v) if isinstance(v, tuple) else v for key, v in head.items()})


def _still_collecting(snapshot_id: int) -> bool:
    """Is a first verdict still worth its CPU? Once the last node is in, the final verdict is
    being made (on the analysis worker's processes): a first one is dropped at its next step
    (after the previous snapshot's read, between slices of the parses read back and of the
    merge, before the facts and the rules) instead of taking the machine's CPU from the
    final one to be thrown away."""
    return Snapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).exists()


def _dropped(snapshot_id: int, where: str) -> None:
    # Said in the worker's log: how often a first verdict is made for nothing, and where.
    log.info("first verdict of snapshot %s dropped %s: the last node is in", snapshot_id, where)


def provisional_awaited(snapshot_id: int) -> bool:
    """Claimed (`_claim`) and not made yet, the snapshot still collecting: for a reader
    (collectors/read_ahead.py), which makes it from the parses it holds."""
    return Snapshot.objects.filter(
        pk=snapshot_id, status=SnapshotStatus.RUNNING, provisional__state=_DUE["state"]
    ).exists()


def snapshot_provisional_analyse(
    *, snapshot_id: int, ahead: services.ReadAhead | None = None
) -> dict | None:
    """Diagnose what is in and store it as the snapshot's provisional verdict (while it is
    still collecting: a final verdict is never overwritten); what was stored, or None.
    `ahead`: what a reader read already (its parses, the merge compared with), used where it
    still holds, as for the final verdict."""
    snapshot = Snapshot.objects.select_related("incident", "cluster").get(pk=snapshot_id)
    if snapshot.status != SnapshotStatus.RUNNING:
        return None
    rows = list(snapshot.collections.order_by("node_name").values_list("node_name", "status"))
    out = [name for name, status in rows if status not in FINISHED_NODE_STATUSES]
    if not out:
        return None
    try:
        previous = services.compared_snapshot(snapshot, ahead)
        if not _still_collecting(snapshot_id):
            return _dropped(snapshot_id, "before the read-back")
        keep_going = partial(_still_collecting, snapshot_id)
        merge = nodeparse.snapshot_parses(
            snapshot, still_out=out, keep_going=keep_going, held=ahead.parses if ahead else None
        )
        # A reader's: what it is made of is freed once the reader is idle again (freed here,
        # it held the reader up to 0.2 s, past the last node when it came in meanwhile).
        spent = ahead.spent if ahead is not None else None
        diagnosis = analysis.diagnose_parses(
            merge.head, merge.parses, merge.reparse, previous=previous, keep_going=keep_going,
            kept=spent,
        )  # fmt: skip
        if spent is not None:
            spent += (merge, diagnosis)
    except analysis.Abandoned as where:
        return _dropped(snapshot_id, str(where))
    except Exception:  # a first verdict is a bonus: the final one still comes
        log.exception("provisional analysis of snapshot %s failed", snapshot_id)
        return None
    verdict = masked_verdict(diagnosis)
    stored = {
        "verdict": verdict,
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
        return _dropped(snapshot_id, "once made")
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SNAPSHOT,
        summary=f"Snapshot {snapshot_id}: provisional verdict, "
        f"{selectors.provisional_label(stored)}: {verdict['summary']}",
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
