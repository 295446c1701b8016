"""The GPU's hour before a snapshot, from the cluster's Prometheus (the DCGM exporter's series).

Before a snapshot is analysed, the console asks the cluster's Prometheus (`prometheus_url`) for
DCGM_FI_DEV_GPU_UTIL, _FB_USED, _POWER_USAGE and _XID_ERRORS of the snapshot's nodes over the
window before it (`query_range`, one POST per metric and chunk of nodes, each chunk's names in
one `Hostname=~` matcher, sized so its answer stays under MAX_SERIES and MAX_ANSWER_BYTES),
through the egress policy (purpose "metrics": the URL is a user's string). A snapshot reads at
most about POINTS_BUDGET points: a big fleet's hour is read at a coarser step, its last RECENT_S
(what the GPU's reading is judged on) still at a fine one (`windows_before`). Each node's series
are stored with its evidence as the system fact `dcgm` (`dcgm.json` in a bundle). The node's
stored parse (made by its worker before the series existed) is kept: the merge gives it the
series as a side input (`series_onto`, the GPU shape read as analysis/gpushape.py reads it),
so no node is parsed again after the last one; a node parsed from its artifacts reads them
there. Read at the click, the series are parsed as they are stored, off the verdict's path,
and the parse kept beside the artifact (`GpuSeriesRecord`, a table only the console writes):
the merge decodes it instead of parsing the JSON again (a bundle's own `dcgm` artifact has
none, and is parsed as the evidence it is). A Prometheus that fails costs the verdict
nothing: the failure's class is said on the timeline and the analysis goes on without it; a
chunk that fails costs only its nodes.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction

from analysis import codec, gpushape
from analysis.gpushape import DCGM_METRICS, RECENT_S, SOURCE_DCGM, GpuSeries, parse_dcgm
from analysis.nodemap import NodeParse
from core import egress
from hangdesk import evidence_kinds as kinds
from hangdesk.artifacts import NODE_META
from incidents.models import EventKind
from incidents.services import timeline_event_record

from .models import (
    Artifact,
    GpuSeriesRecord,
    NodeCollection,
    NodeStatus,
    Snapshot,
    inflate,
    inflate_at_most,
)

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_SERIES = 8192
# ~6 µs of a worker's CPU a point from the answer to the verdict (decode, store, parse again in
# the merge: bench_gpu_metrics at 1,000 nodes), so about 6 s at most, and ~40 MB of answers.
POINTS_BUDGET = 1_000_000
# The reading (spin / idle) is judged on the last RECENT_S: at least six points in it, whatever
# the budget; the rest of the hour is for `since` and the page's strip (SHOWN_POINTS).
RECENT_STEP_AT_MOST_S = 60
HOUR_POINTS_AT_LEAST = 4
# A chunk's size: nodes of up to 16 GPUs (HGX-2), a series' labels as DCGM's exporter sends
# them (~500 B; twice that), a point `[1733130000.000,"31566.25"],` (~30 B; 40).
GPUS_A_NODE_AT_MOST = 16
GPUS_A_NODE = 8  # the budget's estimate of the series asked (nodes report no count before)
SERIES_LABEL_BYTES, POINT_BYTES = 1024, 40
# Of a node's parsed series as stored (`GpuSeriesRecord`, JSON before compression): a node of
# 8 GPUs and 32 points a series is ~9 KB, 16 GPUs of MAX_POINTS points ~0.6 MB. Past it, the
# series are parsed from the artifact, as a bundle's are.
MAX_PARSED_BYTES = 4 * 1024 * 1024
_LABEL_VALUE = re.compile(r"[^\x00-\x1f\"\\]{1,253}")
DCGM_ARTIFACT = kinds.artifact_name(kinds.SYSTEM, SOURCE_DCGM, "")


_clock = time.monotonic


class MetricsUnavailable(Exception):
    """Prometheus did not answer usefully; `kind` is what a responder may be shown."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    step_s: int

    @property
    def points(self) -> int:
        return int((self.end - self.start).total_seconds() // self.step_s) + 1


def window_before(when: datetime) -> Window:
    span = timedelta(seconds=settings.GPU_METRICS_WINDOW_S)
    return Window(when - span, when, max(1, int(settings.GPU_METRICS_STEP_S)))


def windows_before(when: datetime, series: int) -> list[Window]:
    """The window before `when` at the configured step while `series` x its points fit in
    POINTS_BUDGET; else two: the last RECENT_S at a step from half the budget (at most
    RECENT_STEP_AT_MOST_S) and the rest of the hour at the step the other half allows."""
    whole = window_before(when)
    span = (whole.end - whole.start).total_seconds()
    if series * whole.points <= POINTS_BUDGET or span <= 2 * RECENT_S:
        return [whole]
    base = whole.step_s
    fine = math.ceil(RECENT_S * series / (POINTS_BUDGET // 2))
    fine = min(max(base, fine), max(base, RECENT_STEP_AT_MOST_S))
    recent = Window(when - timedelta(seconds=RECENT_S), when, fine)
    left = max(HOUR_POINTS_AT_LEAST, (POINTS_BUDGET - series * recent.points) // series)
    coarse = math.ceil((span - RECENT_S) / left / fine) * fine  # a multiple of the fine step
    return [Window(whole.start, recent.start - timedelta(seconds=1), coarse), recent]


def chunk_size(windows: list[Window]) -> int:
    """Names a query may carry: its answer under MAX_SERIES and MAX_ANSWER_BYTES."""
    points = max(w.points for w in windows)
    node_bytes = GPUS_A_NODE_AT_MOST * (SERIES_LABEL_BYTES + points * POINT_BYTES)
    return max(1, min(MAX_SERIES // GPUS_A_NODE_AT_MOST, MAX_ANSWER_BYTES // node_bytes))


def _matcher(hostnames: list[str]) -> str:
    """`Hostname=~"a|b"`, each name a literal (regex characters escaped, quotes refused)."""
    names = [h for h in hostnames if _LABEL_VALUE.fullmatch(h)]
    alternatives = "|".join(re.escape(h).replace("\\", "\\\\") for h in sorted(set(names)))
    return f'Hostname=~"{alternatives}"'


def query_range(base_url: str, query: str, window: Window) -> list[dict]:
    """One query_range as a form POST; the matrix's series, or MetricsUnavailable."""
    body = urlencode(
        {
            "query": query,
            "start": f"{window.start.timestamp():.3f}",
            "end": f"{window.end.timestamp():.3f}",
            "step": str(window.step_s),
        }
    ).encode()
    url = base_url.rstrip("/") + "/api/v1/query_range"
    try:
        answer = egress.http_request(
            "POST", url, purpose="metrics", body=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=settings.GPU_METRICS_TIMEOUT_S, max_response_bytes=MAX_ANSWER_BYTES,
        )  # fmt: skip
    except egress.DeliveryError as exc:
        raise MetricsUnavailable(exc.kind, exc.detail) from None
    if answer.status != 200:
        raise MetricsUnavailable(f"HTTP {answer.status}")
    try:
        data = json.loads(answer.body)
    except (ValueError, RecursionError):
        raise MetricsUnavailable("not a Prometheus answer") from None
    result = (data.get("data") or {}).get("result") if isinstance(data, dict) else None
    if not isinstance(result, list):
        raise MetricsUnavailable("not a Prometheus answer")
    return [r for r in result[:MAX_SERIES] if isinstance(r, dict)]


def _query(metric: str, matcher: str, window: Window, coarse: bool) -> str:
    # An Xid is a gauge that may be set and cleared between two coarse steps: its maximum
    # over each step is read, so the hour's coarse part still sees it. Utilisation and memory
    # are read at the step's instants (the reading is judged on the fine last minutes).
    selector = f"{metric}{{{matcher}}}"
    if coarse and metric == "DCGM_FI_DEV_XID_ERRORS":
        return f"max_over_time({selector}[{window.step_s}s])"
    return selector


def dcgm_by_hostname(
    base_url: str, hostnames: list[str], windows: list[Window] | Window,
    deadline: float = math.inf,
) -> dict[str, list]:  # fmt: skip
    """Hostname label -> its series ({"metric", "gpu", "UUID", "values"}), every metric, its
    values from every window (oldest first), in one answer per metric and window; no query
    begun past `deadline` (`_clock`)."""
    windows = windows if isinstance(windows, list) else [windows]
    by_key: dict[tuple, dict] = {}
    matcher = _matcher(hostnames)
    for metric in DCGM_METRICS:
        for window in windows:
            if _clock() > deadline:
                raise MetricsUnavailable(egress.TIMED_OUT, "the queries' deadline passed")
            query = _query(metric, matcher, window, window is not windows[-1])
            for series in query_range(base_url, query, window):
                _series_add(by_key, metric, series)
    found: dict[str, list] = {}
    for (host, *_), series in by_key.items():
        found.setdefault(host, []).append(series)
    return found


def _series_add(by_key: dict[tuple, dict], metric: str, series: dict) -> None:
    labels = series.get("metric") if isinstance(series.get("metric"), dict) else {}
    host, values = labels.get("Hostname"), series.get("values")
    if not isinstance(host, str) or not isinstance(values, list):
        return
    gpu, uuid = labels.get("gpu", ""), labels.get("UUID", "")
    key = (host, metric, str(gpu), str(uuid))
    known = by_key.get(key)
    if known is None:
        by_key[key] = {"metric": metric, "gpu": gpu, "UUID": uuid, "values": list(values)}
    else:
        known["values"].extend(values)


@dataclass
class Fetched:
    by_host: dict[str, list]
    unread: dict[str, str]  # a name of a chunk that failed -> why


def dcgm_in_chunks(base_url: str, hostnames: list[str], windows: list[Window]) -> Fetched:
    """`dcgm_by_hostname` a chunk of names at a time; a chunk that fails (or is not asked:
    the queries' deadline, three POSTs' timeouts, passed) costs only its names. The deadline
    bounds what a slow Prometheus costs the verdict: at most about four timeouts in all."""
    names = sorted(set(hostnames))
    size = chunk_size(windows)
    deadline = _clock() + 3 * settings.GPU_METRICS_TIMEOUT_S
    fetched = Fetched({}, {})
    for first in range(0, len(names), size):
        chunk = names[first : first + size]
        try:
            fetched.by_host.update(dcgm_by_hostname(base_url, chunk, windows, deadline))
        except MetricsUnavailable as exc:
            log.info("GPU metrics, a chunk of %d names: %s %s", len(chunk), exc.kind, exc.detail)
            fetched.unread.update(dict.fromkeys(chunk, exc.kind))
    return fetched


def _node_hostnames(snapshot: Snapshot, exclude=()) -> dict[str, NodeCollection]:
    """Every name a node in may carry as DCGM's Hostname label: its name, its own hostname
    (but not the nodes whose ids `exclude` gives)."""
    names: dict[str, NodeCollection] = {}
    ok = snapshot.collections.filter(status=NodeStatus.OK).exclude(pk__in=exclude)
    collections = {c.pk: c for c in ok}
    for collection in collections.values():
        names[collection.node_name] = collection
    metas = Artifact.objects.filter(collection__in=list(collections), name=NODE_META)
    for collection_id, compressed in metas.values_list("collection_id", "compressed"):
        try:
            hostname = json.loads(inflate(compressed)).get("hostname")
        except (ValueError, AttributeError, zlib.error):
            continue
        if isinstance(hostname, str) and hostname:
            names.setdefault(hostname, collections[collection_id])
    return names


def _click_hostnames(snapshot: Snapshot) -> dict[str, NodeCollection]:
    """At the click, before any node is in: every node by its name (the hostnames the nodes
    report are read after the last one: `snapshot_gpu_metrics_top_up`)."""
    return {c.node_name: c for c in snapshot.collections.all()}


def _without_failed(nodes: dict[str, NodeCollection]) -> dict[str, NodeCollection]:
    ids = {c.pk for c in nodes.values()}
    failed = NodeCollection.objects.filter(pk__in=ids, status=NodeStatus.FAILED)
    failed = set(failed.values_list("pk", flat=True))
    return {name: c for name, c in nodes.items() if c.pk not in failed}


def _windows(snapshot: Snapshot, node_count: int) -> list[Window]:
    series = node_count * GPUS_A_NODE * len(DCGM_METRICS)
    return windows_before(snapshot.collected_at or snapshot.started_at, series)


def snapshot_gpu_metrics_store(*, snapshot_id: int, at_click: bool = False) -> int:
    """Fetch and store the DCGM series of a snapshot's nodes (when its cluster names a
    Prometheus): the nodes that are in (or, `at_click`, every node by its name); returns how
    many nodes got series. Never raises for Prometheus's failures."""
    snapshot = Snapshot.objects.select_related("cluster", "incident").get(pk=snapshot_id)
    base_url = snapshot.cluster.prometheus_url
    if not base_url:
        return 0
    nodes = _click_hostnames(snapshot) if at_click else _node_hostnames(snapshot)
    node_count = len({c.pk for c in nodes.values()})
    windows = _windows(snapshot, node_count)
    fetched = dcgm_in_chunks(base_url, list(nodes), windows)
    if not fetched.by_host and fetched.unread:
        kind = sorted(set(fetched.unread.values()))[0]
        say(snapshot, f"GPU metrics from Prometheus not read: {kind}")
        return 0
    if at_click:  # a node that gave no evidence meanwhile keeps no series (as when read after)
        nodes = _without_failed(nodes)
    # Read at the click, each node's parse is kept: made here, off the verdict's path. Read
    # after the last node it is made there either way (once, by the merge).
    stored = series_store(nodes, windows, fetched.by_host, parsed=at_click)
    read = f"{_steps_said(windows)} for {stored:,} of {node_count:,} nodes"
    say(snapshot, f"GPU metrics from Prometheus: the hour before the snapshot {read}"
         f"{_unread_said(nodes, fetched)}")  # fmt: skip
    return stored


def snapshot_gpu_metrics_top_up(*, snapshot_id: int) -> int:
    """After the last node, when the series were read at the click: the nodes in without
    series whose own hostname is not their name are asked by that hostname (the same
    windows: one query of their names, usually none), and the series of nodes that gave no
    evidence are dropped (a verdict reads a node's series only with its evidence, as when
    they were read after the last node). Returns how many nodes got series here."""
    snapshot = Snapshot.objects.select_related("cluster").get(pk=snapshot_id)
    Artifact.objects.filter(collection__snapshot=snapshot, name=DCGM_ARTIFACT).exclude(
        collection__status=NodeStatus.OK
    ).delete()
    GpuSeriesRecord.objects.filter(collection__snapshot=snapshot).exclude(
        collection__status=NodeStatus.OK
    ).delete()
    base_url = snapshot.cluster.prometheus_url
    if not base_url:
        return 0
    with_series = Artifact.objects.filter(collection__snapshot=snapshot, name=DCGM_ARTIFACT).values(
        "collection_id"
    )
    nodes = {
        name: collection
        for name, collection in _node_hostnames(snapshot, exclude=with_series).items()
        if name != collection.node_name
    }
    if not nodes:
        return 0
    windows = _windows(snapshot, snapshot.collections.count())
    fetched = dcgm_in_chunks(base_url, list(nodes), windows)
    return series_store(nodes, windows, fetched.by_host)


def _steps_said(windows: list[Window]) -> str:
    if len(windows) == 1:
        return f"at {windows[0].step_s} s steps"
    return f"at {windows[0].step_s} s steps, its last {RECENT_S:g} s at {windows[-1].step_s} s"


def _unread_said(nodes: dict[str, NodeCollection], fetched: Fetched) -> str:
    read = {nodes[h].pk for h in fetched.by_host if h in nodes}
    unread = {nodes[h].pk: kind for h, kind in fetched.unread.items() if nodes[h].pk not in read}
    if not unread:
        return ""
    kinds_said = ", ".join(sorted(set(unread.values())))
    return f"; {len(unread):,} nodes not read ({kinds_said})"


def series_store(
    nodes: dict[str, NodeCollection], windows: list[Window] | Window, by_host: dict[str, list],
    parsed: bool = False,
) -> int:  # fmt: skip
    """Each node's series as its `dcgm` system artifact (replacing any: a bundle's too), in
    one transaction; its stored parse is kept: the merge reads the series beside it
    (`series_onto`). `parsed`: each node's series parsed here too and kept beside the artifact
    (`GpuSeriesRecord`), for the merge to decode. Returns how many nodes got series."""
    windows = windows if isinstance(windows, list) else [windows]
    said = {"source": "prometheus", "start": windows[0].start.isoformat(),
            "end": windows[-1].end.isoformat(), "step_s": windows[0].step_s}  # fmt: skip
    if len(windows) > 1:
        said.update(recent_start=windows[-1].start.isoformat(), recent_step_s=windows[-1].step_s)
    rows: dict[int, Artifact] = {}
    records: dict[int, GpuSeriesRecord] = {}
    for host, series in by_host.items():
        collection = nodes.get(host)
        if collection is None:
            continue
        stored = {**said, "series": series}
        content = json.dumps(stored).encode()
        rows[collection.pk] = Artifact(
            collection=collection, name=DCGM_ARTIFACT, compressed=zlib.compress(content, 1),
            size=len(content),
        )  # fmt: skip
        # `stored` is JSON decoded (Prometheus's answer): parsed as is, the parse is the one
        # of `content` read back.
        record = _parsed_record(collection, stored) if parsed else None
        if record is not None:
            records[collection.pk] = record
    with transaction.atomic():
        Artifact.objects.filter(collection_id__in=list(rows), name=DCGM_ARTIFACT).delete()
        GpuSeriesRecord.objects.filter(collection_id__in=list(rows)).delete()
        Artifact.objects.bulk_create(rows.values(), batch_size=500)
        for pk, record in records.items():
            record.from_artifact = rows[pk].pk
        GpuSeriesRecord.objects.bulk_create(records.values(), batch_size=500)
    return len(rows)


def _parsed_record(collection: NodeCollection, stored: dict) -> GpuSeriesRecord | None:
    """The node's series parsed as the merge would parse its artifact, as a record to store
    (its artifact's id set once that is stored); None past MAX_PARSED_BYTES."""
    series = gpushape.dcgm_series(collection.node_name, stored)
    raw = json.dumps(gpushape.dcgm_encoded(series), separators=(",", ":")).encode()
    if len(raw) > MAX_PARSED_BYTES:
        return None
    return GpuSeriesRecord(
        collection=collection, from_artifact=0, version=gpushape.DCGM_PARSED_VERSION,
        compressed=zlib.compress(raw, 1), size=len(raw),
    )  # fmt: skip


def series_onto(parses: dict[int, NodeParse], *, snapshot_id: int) -> int:
    """The merge's side input: each stored parse (by collection id, of the snapshot's nodes)
    given its node's stored DCGM series as the map would have read them
    (`gpushape.node_series`: DCGM's hour first, else the probe's samples the parse holds
    already): the console's own parse of its artifact when it kept one that holds
    (`GpuSeriesRecord`), else the artifact parsed. Three queries (the last only for artifacts
    without a usable parse), each by the snapshot: thousands of collection ids in an IN list
    cost 60-100 ms of the verdict's tail at 4,000 nodes, most of it building the query;
    returns the nodes changed."""
    if not parses:
        return 0
    artifacts = Artifact.objects.filter(collection__snapshot_id=snapshot_id, name=DCGM_ARTIFACT)
    artifact_of = {
        collection_id: pk
        for collection_id, pk in artifacts.values_list("collection_id", "pk")
        if collection_id in parses
    }
    unread = set(artifact_of)
    found: dict[int, list[GpuSeries]] = {}
    records = GpuSeriesRecord.objects.filter(collection__snapshot_id=snapshot_id)
    fields = ("collection_id", "from_artifact", "version", "compressed")
    for collection_id, from_artifact, version, compressed in (
        records.values_list(*fields) if artifact_of else ()
    ):
        if collection_id not in artifact_of or from_artifact != artifact_of[collection_id]:
            continue  # not a parse's node, or its artifact was replaced since (a bundle's)
        series = _parsed_read(collection_id, parses[collection_id].node, version, compressed)
        if series is not None:
            found[collection_id] = series
            unread.discard(collection_id)
    rows = artifacts.filter(collection_id__in=list(unread)) if unread else artifacts.none()
    for collection_id, compressed in rows.values_list("collection_id", "compressed").iterator():
        try:
            text = inflate(compressed).decode("utf-8", "replace")
        except zlib.error:
            continue
        found[collection_id] = parse_dcgm(parses[collection_id].node, text)
    changed = 0
    for collection_id, dcgm in found.items():
        if dcgm:
            parses[collection_id].gpu_series = dcgm
            changed += 1
    return changed


def _parsed_read(
    collection_id: int, node: str, version: int, compressed: bytes | memoryview
) -> list[GpuSeries] | None:
    """A kept parse of a node's series, or None (logged) when it is of another version, too
    big, damaged or of another shape."""
    try:
        if version != gpushape.DCGM_PARSED_VERSION:
            raise codec.CodecError(f"version {version}")
        raw = inflate_at_most(compressed, MAX_PARSED_BYTES)
        return gpushape.dcgm_decoded(node, json.loads(raw))
    except (zlib.error, ValueError, RecursionError) as exc:  # CodecError is a ValueError
        log.warning("kept GPU series of collection %s not used: %s", collection_id, exc)
        return None


def say(snapshot: Snapshot, text: str, kind=EventKind.SYSTEM, phase: str = "gpu_metrics") -> None:
    """A line on the snapshot's incident timeline about its GPU metrics."""
    timeline_event_record(
        incident=snapshot.incident,
        kind=kind,
        summary=f"Snapshot {snapshot.pk}: {text}",
        source="worker",
        details={"snapshot": snapshot.pk, "phase": phase},
    )
