"""The GPU's hour before a snapshot, from the cluster's Prometheus (the DCGM exporter's series).

Before a snapshot is analysed, the console asks the cluster's Prometheus (`prometheus_url`) for
DCGM_FI_DEV_GPU_UTIL, _FB_USED, _POWER_USAGE and _XID_ERRORS of the snapshot's nodes over the
window before it (`query_range`, one POST per metric, every node in one `Hostname=~` matcher),
through the egress policy (purpose "metrics": the URL is a user's string). Each node's series
are stored with its evidence as the system fact `dcgm` (`dcgm.json` in a bundle). The node's
stored parse (made by its worker before the series existed) is kept: the merge gives it the
series as a side input (`series_onto`, the GPU shape read as analysis/gpushape.py reads it),
so no node is parsed again after the last one; a node parsed from its artifacts reads them
there. A Prometheus that fails costs the verdict nothing: the failure's class is said on the
timeline and the analysis goes on without it.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction

from analysis.gpushape import DCGM_METRICS, SOURCE_DCGM, parse_dcgm
from analysis.nodemap import NodeParse
from core import egress
from hangdesk import evidence_kinds as kinds
from hangdesk.artifacts import NODE_META
from incidents.models import EventKind
from incidents.services import timeline_event_record

from .models import Artifact, NodeCollection, NodeStatus, Snapshot, inflate

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 16 * 1024 * 1024
MAX_SERIES = 8192
_LABEL_VALUE = re.compile(r"[^\x00-\x1f\"\\]{1,253}")
DCGM_ARTIFACT = kinds.artifact_name(kinds.SYSTEM, SOURCE_DCGM, "")


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


def window_before(when: datetime) -> Window:
    span = timedelta(seconds=settings.GPU_METRICS_WINDOW_S)
    return Window(when - span, when, max(1, int(settings.GPU_METRICS_STEP_S)))


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


def dcgm_by_hostname(base_url: str, hostnames: list[str], window: Window) -> dict[str, list]:
    """Hostname label -> its series ({"metric", "gpu", "UUID", "values"}), every metric."""
    found: dict[str, list] = {}
    matcher = _matcher(hostnames)
    for metric in DCGM_METRICS:
        for series in query_range(base_url, f"{metric}{{{matcher}}}", window):
            labels = series.get("metric") if isinstance(series.get("metric"), dict) else {}
            host = labels.get("Hostname")
            values = series.get("values")
            if not isinstance(host, str) or not isinstance(values, list):
                continue
            found.setdefault(host, []).append(
                {"metric": metric, "gpu": labels.get("gpu", ""), "UUID": labels.get("UUID", ""),
                 "values": values}
            )  # fmt: skip
    return found


def _node_hostnames(snapshot: Snapshot) -> dict[str, NodeCollection]:
    """Every name a node may carry as DCGM's Hostname label: its name, its own hostname."""
    names: dict[str, NodeCollection] = {}
    collections = {c.pk: c for c in snapshot.collections.filter(status=NodeStatus.OK)}
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


def snapshot_gpu_metrics_store(*, snapshot_id: int) -> int:
    """Fetch and store the DCGM series of a snapshot's nodes (when its cluster names a
    Prometheus); returns how many nodes got series. Never raises for Prometheus's failures."""
    snapshot = Snapshot.objects.select_related("cluster", "incident").get(pk=snapshot_id)
    base_url = snapshot.cluster.prometheus_url
    if not base_url:
        return 0
    nodes = _node_hostnames(snapshot)
    window = window_before(snapshot.collected_at or snapshot.started_at)
    try:
        by_host = dcgm_by_hostname(base_url, list(nodes), window)
    except MetricsUnavailable as exc:
        log.info("GPU metrics for snapshot %s: %s %s", snapshot_id, exc.kind, exc.detail)
        _say(snapshot, f"GPU metrics from Prometheus not read: {exc.kind}")
        return 0
    stored = series_store(nodes, window, by_host)
    _say(snapshot, f"GPU metrics from Prometheus: the hour before the snapshot for {stored} of "
         f"{len({c.pk for c in nodes.values()})} nodes")  # fmt: skip
    return stored


def series_store(nodes: dict[str, NodeCollection], window: Window, by_host: dict[str, list]) -> int:
    """Each node's series as its `dcgm` system artifact (replacing any: a bundle's too), in
    one transaction; its stored parse is kept: the merge reads the series beside it
    (`series_onto`). Returns how many nodes got series."""
    rows: dict[int, Artifact] = {}
    for host, series in by_host.items():
        collection = nodes.get(host)
        if collection is None:
            continue
        content = json.dumps(
            {"source": "prometheus", "start": window.start.isoformat(),
             "end": window.end.isoformat(), "step_s": window.step_s, "series": series}
        ).encode()  # fmt: skip
        rows[collection.pk] = Artifact(
            collection=collection, name=DCGM_ARTIFACT, compressed=zlib.compress(content, 1),
            size=len(content),
        )  # fmt: skip
    with transaction.atomic():
        Artifact.objects.filter(collection_id__in=list(rows), name=DCGM_ARTIFACT).delete()
        Artifact.objects.bulk_create(rows.values(), batch_size=500)
    return len(rows)


def series_onto(parses: dict[int, NodeParse]) -> int:
    """The merge's side input: each stored parse (by collection id) given its node's stored
    DCGM series as the map would have read them (`gpushape.node_series`: DCGM's hour first,
    else the probe's samples the parse holds already). One query; returns the nodes changed."""
    if not parses:
        return 0
    changed = 0
    rows = Artifact.objects.filter(collection_id__in=list(parses), name=DCGM_ARTIFACT)
    for collection_id, compressed in rows.values_list("collection_id", "compressed").iterator():
        parse = parses[collection_id]
        try:
            text = inflate(compressed).decode("utf-8", "replace")
        except zlib.error:
            continue
        dcgm = parse_dcgm(parse.node, text)
        if dcgm:
            parse.gpu_series = dcgm
            changed += 1
    return changed


def _say(snapshot: Snapshot, text: str) -> None:
    timeline_event_record(
        incident=snapshot.incident,
        kind=EventKind.SYSTEM,
        summary=f"Snapshot {snapshot.pk}: {text}",
        source="worker",
        details={"snapshot": snapshot.pk, "phase": "gpu_metrics"},
    )
