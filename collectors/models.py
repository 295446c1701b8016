"""Snapshots: one visit to every node of a cluster, its raw evidence and its diagnosis.

The diagnosis is stored as JSON (`Diagnosis.to_json()`): its head in `Snapshot.diagnosis`, its
per-rank table (`per_rank`, 13 MB of the JSON at 32,000 ranks) apart in `RankChunk` rows
(collectors/rankstore.py), both written by one UPDATE (`SnapshotQuerySet.update`) in one
transaction; the head's long lists of ranks are stored as runs (`DiagnosisField`,
collectors/headruns.py) and read back as made. It is read back typed
(`Snapshot.read_diagnosis()`), whatever version stored it.
Beside it, `rank_overview` (analysis/rankview.py): what a page shows of the table without
reading it (counts and ranges per status, the chart's groups, the suspect, missing and first
rows); pages read the head (`Snapshot.objects.for_pages()`) and the table a page at a time
(`Snapshot.rank_rows`: the chunks it falls in).
"""

from __future__ import annotations

import zlib

from django.conf import settings
from django.db import models, router, transaction
from django.db.models import Q, QuerySet
from django.db.models.fields.json import KT, KeyTransform

from analysis.diagnosis import Diagnosis
from analysis.evidence import EvidenceStatus
from analysis.rankview import RankOverview, overview
from clusters.models import Cluster, Node
from collectors import headruns, rankstore
from incidents.models import Incident


class SnapshotStatus(models.TextChoices):
    RUNNING = "running", "Collecting"
    ANALYSING = "analysing", "Analysing"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class Transitions:
    """The status rule: which moves a status field may make. Every conditional UPDATE of a
    snapshot's or a node's status goes through `move()`, which only touches rows whose status
    may move to the new one; callers add their own conditions (which task owns the row)."""

    def __init__(self, statuses: type[models.TextChoices], moves: dict[str, tuple[str, ...]]):
        self.moves = moves
        # Statuses with a way out are still in progress; the others are final.
        self.active = tuple(s for s in statuses if s in moves)
        self.finished = tuple(s for s in statuses if s not in moves)

    def sources(self, to: str) -> list[str]:
        return [status for status, targets in self.moves.items() if to in targets]

    def move(self, rows: QuerySet, to: str, **changes) -> int:
        """UPDATE the rows that may move to `to`; returns how many did."""
        sources = self.sources(to)
        if not sources:
            raise ValueError(f"no status moves to {str(to)!r}")
        return rows.filter(status__in=sources).update(status=to, **changes)


SNAPSHOT_FLOW = Transitions(
    SnapshotStatus,
    {
        # The last node is in (a bundle's snapshot starts at analysing); or a push snapshot's
        # wait ended with no node's bundle.
        SnapshotStatus.RUNNING: (SnapshotStatus.ANALYSING, SnapshotStatus.FAILED),
        SnapshotStatus.ANALYSING: (SnapshotStatus.DONE, SnapshotStatus.FAILED),
    },
)
ACTIVE_SNAPSHOT_STATUSES = SNAPSHOT_FLOW.active


class DiagnosisField(models.JSONField):
    """The diagnosis head: its long lists of ranks stored as runs (collectors/headruns.py:
    1.29 MB of jsonb at 32,000 ranks, 0.22 MB so), read back as the head that was made, so
    no reader of the field sees the stored form."""

    def get_prep_value(self, value):
        return super().get_prep_value(headruns.stored(value))

    def from_db_value(self, value, expression, connection):
        value = super().from_db_value(value, expression, connection)
        if isinstance(expression, KeyTransform):
            return value  # a key's value read alone (the class): not a head
        return headruns.read(value)


class SnapshotQuerySet(QuerySet):
    def for_pages(self) -> SnapshotQuerySet:
        """Snapshots as a page reads them: the diagnosis head (its stored overview's rows stand
        in for the per-rank table: `read_diagnosis` carries them), the table left unread."""
        return self.defer("diagnosis").annotate(
            diagnosis_head=models.F("diagnosis"), has_diagnosis=Q(diagnosis__isnull=False)
        )

    def update(self, **changes) -> int:
        """An UPDATE that writes a diagnosis stores its per-rank table apart (`RankChunk`
        rows, collectors/rankstore.py), in the same transaction: no reader sees a head
        without its rows, nor the rows of another verdict."""
        if "diagnosis" not in changes:
            return super().update(**changes)
        head, rows = rankstore.split(changes["diagnosis"])
        changes["diagnosis"] = head
        changes["rank_values"] = rankstore.field_values(rows) if rows is not None else None
        with transaction.atomic(using=self.db):
            pks = list(self.select_for_update().values_list("pk", flat=True))
            if not pks:
                return 0
            moved = Snapshot.objects.filter(pk__in=pks)._plain_update(**changes)
            _rank_chunks_store(pks, rows, using=self.db)
            return moved

    def _plain_update(self, **changes) -> int:
        return super().update(**changes)


class Snapshot(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="snapshots")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="snapshots")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    source = models.CharField(max_length=64, blank=True, help_text="who asked, when no person")
    status = models.CharField(
        max_length=16, choices=SnapshotStatus.choices, default=SnapshotStatus.RUNNING
    )
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # When the evidence was gathered, if not when this snapshot started (an imported bundle).
    collected_at = models.DateTimeField(null=True, blank=True)
    expected_world_size = models.PositiveIntegerField(null=True, blank=True)
    diagnosis = DiagnosisField(null=True, blank=True)
    # Its class, kept beside it by the database (a generated column): a list of incidents
    # reads it without the diagnosis, which is 12 MB of JSON at 32,000 ranks.
    classification = models.GeneratedField(
        expression=KT("diagnosis__classification"),
        output_field=models.CharField(max_length=32, null=True),
        db_persist=True,
    )
    # analysis.rankview.RankOverview.to_json() of the diagnosis, stored with it.
    rank_overview = models.JSONField(null=True, blank=True)
    # The distinct values of rankstore.VALUE_FIELDS over the per-rank table, stored with it.
    rank_values = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # What the scheduler said about the job when the snapshot started (collectors/scheduler.py:
    # the job, its steps, node states, the commands' output), or None for a listed-node cluster.
    scheduler = models.JSONField(null=True, blank=True)
    # A push cluster's snapshot waits for the bundles its nodes send (collectors/push.py): how
    # many it expects, and until when (its upload tokens expire then).
    expected_nodes = models.PositiveIntegerField(null=True, blank=True)
    upload_until = models.DateTimeField(null=True, blank=True)
    # A verdict before the last node (collectors/provisional.py): {"diagnosis", "nodes_in",
    # "nodes_total", "missing": [names still out], "at"}; cleared when the verdict is stored.
    provisional = models.JSONField(null=True, blank=True)
    # The cluster's GPU metrics, read from the click beside the node visits
    # (collectors/gpuclick.py): "" not so (read before the analysis, as a bundle's are),
    # "reading", "read", or "missed" (the verdict was made without them; made again once).
    gpu_metrics = models.CharField(max_length=8, blank=True, default="")
    # A large snapshot's parses read ahead while its nodes arrive (collectors/read_ahead.py):
    # the reader's lease, renewed while it lives; the final verdict is its to make until then.
    reader = models.CharField(max_length=32, blank=True, default="")
    reader_until = models.DateTimeField(null=True, blank=True)

    objects = SnapshotQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-pk"]
        constraints = [
            # A second click while one runs must not start a duplicate.
            models.UniqueConstraint(
                fields=["incident"],
                condition=Q(status__in=[str(s) for s in ACTIVE_SNAPSHOT_STATUSES]),
                name="one_active_snapshot_per_incident",
            )
        ]

    def __str__(self) -> str:
        return f"snapshot {self.pk} of {self.cluster.name} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        """A diagnosis saved with its per-rank table stores the table apart (as `update()`),
        the head written once."""
        head, rows = rankstore.split(self.diagnosis)
        fields = kwargs.get("update_fields")
        if rows is None or (fields is not None and "diagnosis" not in fields):
            super().save(*args, **kwargs)
            return
        if fields is not None:
            kwargs["update_fields"] = {*fields, "rank_values"}
        using = kwargs.get("using") or router.db_for_write(Snapshot, instance=self)
        with transaction.atomic(using=using):
            whole, self.diagnosis = self.diagnosis, head
            self.rank_values = rankstore.field_values(rows)
            try:
                super().save(*args, **kwargs)
            finally:
                self.diagnosis = whole
            _rank_chunks_store([self.pk], rows, using=using)

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE_SNAPSHOT_STATUSES

    @property
    def waits_for_uploads(self) -> bool:
        """A push snapshot still collecting: its nodes' bundles are welcome."""
        return self.upload_until is not None and self.status == SnapshotStatus.RUNNING

    def read_diagnosis(self) -> Diagnosis | None:
        """The stored diagnosis, typed and upgraded to the current schema (read once per
        instance: a page asks for it from several places). Loaded `for_pages()`, its
        per-rank table holds only the overview's rows: the suspects, the missing and the
        first ranks (read_rank_overview() has the counts and groups of all of them)."""
        data = self._diagnosis_data()
        if not data:
            return None
        cached = self.__dict__.get("_read_diagnosis")
        if cached is None or cached[0] is not data:
            cached = (data, Diagnosis.from_json(data))
            self.__dict__["_read_diagnosis"] = cached
        return cached[1]

    def whole_diagnosis(self) -> dict | None:
        """The stored diagnosis as JSON, its per-rank table read back from its chunks (an
        export's, a test's: a page reads `for_pages()` and a page of rows)."""
        head = self.diagnosis
        if not isinstance(head, dict) or "per_rank" in head:
            return head  # None, or held whole in memory (as it was just stored)
        cached = self.__dict__.get("_whole_diagnosis")
        if cached is None or cached[0] is not head:
            cached = (head, {**head, "per_rank": self.rank_rows(0, None)})
            self.__dict__["_whole_diagnosis"] = cached
        return cached[1]

    def _diagnosis_data(self) -> dict | None:
        head = self.__dict__.get("diagnosis_head")
        if "diagnosis" in self.get_deferred_fields() and head is not None and self.rank_overview:
            light = self.__dict__.get("_light_diagnosis")
            if light is None or light[0] is not head:
                stored = self.rank_overview
                rows = stored.get("rows") if isinstance(stored, dict) else []
                light = (head, {**head, "per_rank": rows or []})
                self.__dict__["_light_diagnosis"] = light
            return light[1]
        return self.whole_diagnosis()

    def read_rank_overview(self) -> RankOverview | None:
        """The per-rank table's overview: stored with the diagnosis, or (a diagnosis stored
        before overviews were) made from the whole table."""
        stored = RankOverview.from_json(self.rank_overview)
        if stored is not None:
            return stored
        if "diagnosis" in self.get_deferred_fields() and self.__dict__.get("diagnosis_head"):
            self.__dict__.pop("_read_diagnosis", None)  # the whole table, this once
        whole = self.whole_diagnosis()
        diagnosis = Diagnosis.from_json(whole) if whole else None
        return overview(diagnosis) if diagnosis is not None else None

    def rank_rows(self, start: int, stop: int | None) -> list[dict]:
        """Rows [start, stop) of the stored per-rank table as JSON (stop None: to its end),
        from the chunks they fall in."""
        found = RankChunk.objects.filter(snapshot_id=self.pk)
        if stop is not None:
            if stop <= start:
                return []
            found = found.filter(first__lt=stop, first__gt=start - rankstore.CHUNK_ROWS)
        rows: list[dict] = []
        first = None
        for at, stored in found.order_by("first").values_list("first", "rows"):
            first = at if first is None else first
            rows.extend(rankstore.rows_of(stored))
        if first is None:
            return []
        return rows[start - first : None if stop is None else stop - first]

    def rank_row_json(self, rank: int) -> dict | None:
        """The stored per-rank table's row for `rank` as JSON, from the chunk(s) whose rank
        range holds it."""
        rank = int(rank)
        chunks = RankChunk.objects.filter(snapshot_id=self.pk, rank_lo__lte=rank, rank_hi__gte=rank)
        for stored in chunks.order_by("first").values_list("rows", flat=True):
            for row in rankstore.rows_of(stored):
                if isinstance(row, dict) and row.get("rank") == rank:
                    return row
        return None

    def rank_field_values(self, name: str) -> list:
        """The distinct values of one field of the stored per-rank table's rows (nulls left
        out): made at write time for rankstore.VALUE_FIELDS, else from every chunk."""
        if not name.isidentifier():
            raise ValueError(f"not a row field: {name!r}")
        stored = (
            Snapshot.objects.filter(pk=self.pk).values_list("rank_values", flat=True).first()
        )  # fmt: skip
        if isinstance(stored, dict) and isinstance(stored.get(name), list):
            return stored[name]
        return rankstore.field_values(self.rank_rows(0, None), (name,))[name]

    @property
    def duration_s(self) -> float | None:
        if not self.finished_at:
            return None
        return (self.finished_at - self.started_at).total_seconds()


def _rank_chunks_store(pks: list[int], rows: list | None, *, using: str) -> None:
    """The snapshots' per-rank table, in place of what they held (None or []: none)."""
    RankChunk.objects.using(using).filter(snapshot_id__in=pks).delete()
    if rows:
        made = rankstore.chunks(rows)
        RankChunk.objects.using(using).bulk_create(
            RankChunk(snapshot_id=pk, **vars(chunk)) for pk in pks for chunk in made
        )


class RankChunk(models.Model):
    """CHUNK_ROWS rows of a snapshot's per-rank table, in table order (collectors/rankstore.py):
    written with the diagnosis head in one transaction (`SnapshotQuerySet.update`)."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="rank_chunks")
    first = models.PositiveIntegerField(help_text="the position of its first row in the table")
    count = models.PositiveIntegerField()
    rank_lo = models.IntegerField(null=True)
    rank_hi = models.IntegerField(null=True)
    rows = models.BinaryField(help_text="zlib of the rows' JSON array")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "first"], name="one_rank_chunk_per_first")
        ]

    def __str__(self) -> str:
        return f"ranks chunk {self.first}+{self.count} of snapshot {self.snapshot_id}"


class NodeStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Collecting"
    OK = "ok", "OK"
    FAILED = "failed", "Failed"


NODE_FLOW = Transitions(
    NodeStatus,
    {
        # Claimed by a task; or failed by the sweep, never claimed in time.
        NodeStatus.PENDING: (NodeStatus.RUNNING, NodeStatus.FAILED),
        # Resumed by its own task's redelivered or retried copy; finished by it; or failed by
        # the sweep once its worker is long gone.
        NodeStatus.RUNNING: (NodeStatus.RUNNING, NodeStatus.OK, NodeStatus.FAILED),
    },
)
FINISHED_NODE_STATUSES = NODE_FLOW.finished


class NodeCollection(models.Model):
    """One node's part of a snapshot: claimed by one task, finished once."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="collections")
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True)
    # Kept by value: the evidence must still say where it came from after a node is removed.
    node_name = models.CharField(max_length=128)
    address = models.CharField(max_length=253)
    status = models.CharField(max_length=16, choices=NodeStatus.choices, default=NodeStatus.PENDING)
    # Failed: why. OK: why its evidence stopped short, or "" when it is whole.
    reason = models.TextField(blank=True)
    # The task that owns the work; a redelivered copy of the same task may resume it,
    # any other task leaves it alone.
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node_name"]
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "node_name"], name="one_visit_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.node_name}: {self.status}"

    @property
    def evidence_status(self) -> EvidenceStatus:
        """What the analysis is told of this node's evidence."""
        if self.status == NodeStatus.OK:
            return EvidenceStatus(True, self.reason)
        return EvidenceStatus(False, self.reason or f"no evidence ({self.status})")

    @property
    def duration_s(self) -> float | None:
        if not (self.started_at and self.finished_at):
            return None
        return (self.finished_at - self.started_at).total_seconds()


class NodeParseRecord(models.Model):
    """One node's evidence parsed by the worker that collected it (`analysis.nodemap`): the
    analysis merges these instead of parsing every node again. JSON, zlib-compressed; read
    back as untrusted (versioned, size-bounded, checked field by field): a record that fails
    is parsed again from the node's artifacts."""

    collection = models.OneToOneField(
        NodeCollection, on_delete=models.CASCADE, related_name="parse_record"
    )
    version = models.PositiveSmallIntegerField()
    hostname = models.CharField(max_length=255, blank=True)
    compressed = models.BinaryField()
    size = models.PositiveIntegerField(help_text="bytes before compression")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"parse of {self.collection_id} (v{self.version}, {self.size} bytes)"


class GpuSeriesRecord(models.Model):
    """A node's DCGM series as the console parsed them when it stored its own Prometheus read
    (collectors/gpumetrics.py), so the merge after the last node decodes them instead of
    parsing the `dcgm` artifact's JSON again. Only the console writes this table: a bundle's
    `dcgm` artifact has no record and is parsed as the evidence it is. It names the artifact
    row it was parsed from (an artifact replaced or dropped leaves it unused) and is read back
    as untrusted (versioned, size-bounded, checked field by field): one that fails is not
    used, the artifact is parsed instead."""

    collection = models.OneToOneField(
        NodeCollection, on_delete=models.CASCADE, related_name="gpu_series_record"
    )
    from_artifact = models.BigIntegerField(help_text="the id of the dcgm artifact parsed")
    version = models.PositiveSmallIntegerField()
    compressed = models.BinaryField()
    size = models.PositiveIntegerField(help_text="bytes before compression")

    def __str__(self) -> str:
        return f"GPU series of {self.collection_id} (v{self.version}, {self.size} bytes)"


class Artifact(models.Model):
    """One raw output (a log tail, a stack dump, dmesg...), zlib-compressed."""

    collection = models.ForeignKey(
        NodeCollection, on_delete=models.CASCADE, related_name="artifacts"
    )
    # Bundle-style name: ps.txt, environ/<pid>, pyspy/<pid>.json, logs/<remote path>, ...
    name = models.CharField(max_length=1024)
    compressed = models.BinaryField()
    size = models.PositiveIntegerField(help_text="bytes before compression")
    truncated = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "name"], name="unique_artifact_name")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def content(self) -> bytes:
        return inflate(self.compressed)


def inflate(compressed: bytes | memoryview) -> bytes:
    return zlib.decompress(bytes(compressed))


def inflate_at_most(compressed: bytes | memoryview, limit: int) -> bytes:
    """The bytes inflated, or ValueError past `limit` (a stored form read back as untrusted:
    never more than the bound is inflated). zlib.error when damaged."""
    inflater = zlib.decompressobj()
    raw = inflater.decompress(bytes(compressed), limit + 1)
    if len(raw) > limit or inflater.unconsumed_tail:
        raise ValueError("over the size bound")
    return raw


class UploadToken(models.Model):
    """Admits the bundles of one push snapshot's nodes (`hangdesk upload --token`): random,
    shown once to the responder who asked for it, kept as its SHA-256 only, and valid while
    that snapshot waits (until `Snapshot.upload_until`). Each responder who asks gets one."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="upload_tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)  # shown, to tell tokens apart
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.prefix}… for snapshot {self.snapshot_id}"
