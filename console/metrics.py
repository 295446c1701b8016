"""`/metrics`: the console's health in the Prometheus text format (version 0.0.4).

What it says, read at scrape time from the database and the broker (no counters kept in a
process, so every web process answers the same and a restart loses nothing):

- hangdesk_snapshots{status}: snapshots by status (collecting ones stuck there are the alarm);
- hangdesk_snapshot_duration_seconds, hangdesk_node_collection_duration_seconds: histograms
  of finished snapshots (start to verdict) and node visits (claim to last byte);
- hangdesk_node_failures{kind}: failed node visits by kind (unreachable, auth, host key, ...,
  "worker lost" for the sweep's);
- hangdesk_queue_depth{queue}: messages waiting in each Celery queue, asked of the broker;
  hangdesk_broker_up: whether the broker answered;
- hangdesk_heartbeat_age_seconds{hostname}: since each worker was last seen (beat schedules a
  heartbeat every 30 s and a worker of the default queue records it), and
  hangdesk_beat_heartbeat_age_seconds: the newest of them — past a minute, beat or every
  default-queue worker is down.

Access: a scraper on a network of settings.METRICS_ALLOWED_NETWORKS (loopback by default), or
one that sends `Authorization: Bearer <settings.METRICS_TOKEN>`; anyone else gets 403. It is
not behind the login: Prometheus has no session.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import Substr
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from core.clients import client_ip
from core.models import WorkerHeartbeat

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SNAPSHOT_BUCKETS = (10, 30, 60, 120, 300, 600, 1800)
NODE_BUCKETS = (1, 5, 10, 30, 60, 150)
# A failed node's reason starts with what kind of failure it was (collectors/remote.py,
# collectors/services.py); "worker lost" is the sweep's.
FAILURE_PREFIXES = (
    ("unreachable", "unreachable"),
    ("connection lost", "connection lost"),
    ("ssh error", "ssh error"),
    ("host key", "host key"),
    ("auth failed", "auth"),
    ("probe failed: internal error", "internal"),
    ("probe failed", "probe"),
    ("invalid plan", "invalid plan"),
    ("node removed", "node removed"),
    ("no worker finished", "worker lost"),
)


def allowed(request: HttpRequest) -> bool:
    token = getattr(settings, "METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())
    try:
        address = ipaddress.ip_address(client_ip(request) or "")
    except ValueError:
        return False
    networks = getattr(settings, "METRICS_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
    return any(address in ipaddress.ip_network(n, strict=False) for n in networks)


@login_not_required  # Prometheus has no session: the allowlist or the token decides
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    lines: list[str] = []
    _snapshots(lines)
    _histogram(lines, Snapshot.objects.all(), "hangdesk_snapshot_duration_seconds",
               "Finished snapshots, start to verdict.", SNAPSHOT_BUCKETS)  # fmt: skip
    _histogram(lines, NodeCollection.objects.all(), "hangdesk_node_collection_duration_seconds",
               "Finished node visits, claim to last byte.", NODE_BUCKETS)  # fmt: skip
    _failures(lines)
    _queues(lines)
    _heartbeats(lines)
    return HttpResponse("\n".join(lines) + "\n", content_type=CONTENT_TYPE)


def _head(lines: list[str], name: str, kind: str, text: str) -> None:
    lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _snapshots(lines: list[str]) -> None:
    _head(lines, "hangdesk_snapshots", "gauge", "Snapshots by status.")
    counts = dict(Snapshot.objects.values_list("status").annotate(n=Count("id")))
    for status in SnapshotStatus.values:
        lines.append(f'hangdesk_snapshots{{status="{status}"}} {counts.get(status, 0)}')


def _histogram(lines, rows, name: str, text: str, buckets: tuple[int, ...]) -> None:
    took = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    rows = rows.filter(finished_at__isnull=False, started_at__isnull=False).annotate(took=took)
    counts = {f"le{b}": Count("id", filter=Q(took__lte=timedelta(seconds=b)))
              for b in buckets}  # fmt: skip
    result = rows.aggregate(total=Count("id"), seconds=Sum("took"), **counts)
    _head(lines, name, "histogram", text)
    for bucket in buckets:
        lines.append(f'{name}_bucket{{le="{bucket}"}} {result[f"le{bucket}"]}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {result["total"]}')
    seconds = result["seconds"].total_seconds() if result["seconds"] else 0.0
    lines += [f"{name}_sum {seconds:.3f}", f"{name}_count {result['total']}"]


def failure_kind(reason: str) -> str:
    for prefix, kind in FAILURE_PREFIXES:
        if reason.startswith(prefix):
            return kind
    return "other"


def _failures(lines: list[str]) -> None:
    _head(lines, "hangdesk_node_failures", "gauge", "Failed node visits by kind of failure.")
    kinds = {kind: 0 for _, kind in FAILURE_PREFIXES}
    kinds["other"] = 0
    failed = NodeCollection.objects.filter(status=NodeStatus.FAILED)
    starts = failed.values(start=Substr("reason", 1, 32)).annotate(n=Count("id"))
    for row in starts.values_list("start", "n"):
        kinds[failure_kind(row[0])] += row[1]
    for kind, n in kinds.items():
        lines.append(f'hangdesk_node_failures{{kind="{_label(kind)}"}} {n}')


def _queue_names() -> list[str]:
    names = {q for worker in settings.HANGDESK_WORKERS.values() for q in worker["queues"]}
    return sorted(names)


def queue_depths() -> dict[str, int] | None:
    """Messages waiting per queue, or None when the broker does not answer."""
    from core.celery import app

    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
            channel = conn.default_channel
            # Not passive: kombu's Redis transport calls an empty queue missing then.
            names = _queue_names()
            return {name: channel.queue_declare(queue=name).message_count for name in names}
    except Exception as exc:  # the broker is down or refuses: say so, do not fail the scrape
        log.warning("metrics: the broker did not answer: %s", exc)
        return None


def _queues(lines: list[str]) -> None:
    depths = queue_depths()
    _head(lines, "hangdesk_broker_up", "gauge", "1 when the Celery broker answered.")
    lines.append(f"hangdesk_broker_up {0 if depths is None else 1}")
    _head(lines, "hangdesk_queue_depth", "gauge", "Messages waiting in each Celery queue.")
    for name, depth in sorted((depths or {}).items()):
        lines.append(f'hangdesk_queue_depth{{queue="{_label(name)}"}} {depth}')


def _heartbeats(lines: list[str]) -> None:
    now = timezone.now()
    ages = {h.hostname: (now - h.seen_at).total_seconds() for h in WorkerHeartbeat.objects.all()}
    _head(lines, "hangdesk_heartbeat_age_seconds", "gauge", "Since each worker was last seen.")
    for hostname, age in sorted(ages.items()):
        lines.append(f'hangdesk_heartbeat_age_seconds{{hostname="{_label(hostname)}"}} {age:.1f}')
    text = "Since the newest heartbeat (beat schedules one every 30 s); -1 when none ever."
    _head(lines, "hangdesk_beat_heartbeat_age_seconds", "gauge", text)
    newest = min(ages.values()) if ages else -1
    lines.append(f"hangdesk_beat_heartbeat_age_seconds {newest:.1f}")
