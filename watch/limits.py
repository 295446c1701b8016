"""What keeps a click or a token from costing more than it should, each one conditional
UPDATE on the cluster's watch (shared by every web process):

- one "Run preflight" at a time per cluster (a full node visit per click was queued with no
  claim): the click claims it with a lease as long as the task may run, the task releases it;
- a bounded heartbeat rate per watch (a token holder pushed ~90 requests/s): at most
  max(WATCH_HEARTBEATS_PER_S, the cluster's expected world size) a second, then 429.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from clusters.models import Cluster

from .claims import CLAIM_LEASE
from .configure import watch_for
from .models import Watch

LEASE = CLAIM_LEASE  # the preflight task's hard limit, and some
SECOND = timedelta(seconds=1)


def preflight_claim(cluster: Cluster, *, now: datetime | None = None) -> str | None:
    """A claim to queue the cluster's preflight under; None while one is in flight."""
    now = now or timezone.now()
    claim = uuid.uuid4().hex
    free = Q(preflight_until__isnull=True) | Q(preflight_until__lt=now)
    won = Watch.objects.filter(free, pk=watch_for(cluster).pk).update(
        preflight_claim=claim, preflight_until=now + LEASE
    )
    return claim if won else None


def preflight_release(*, cluster_id: int, claim: str) -> bool:
    released = Watch.objects.filter(cluster_id=cluster_id, preflight_claim=claim).update(
        preflight_claim="", preflight_until=None
    )
    return bool(released)


def heartbeat_admit(watch: Watch, *, now: datetime | None = None) -> bool:
    """Count one heartbeat in the watch's current second; False once it is over the limit."""
    now = now or timezone.now()
    limit = max(
        getattr(settings, "WATCH_HEARTBEATS_PER_S", 10), watch.cluster.expected_world_size or 0
    )
    new_window = Q(heartbeat_window_at__isnull=True) | Q(heartbeat_window_at__lte=now - SECOND)
    admitted = Watch.objects.filter(new_window | Q(heartbeat_window_count__lt=limit), pk=watch.pk)
    return bool(
        admitted.update(
            heartbeat_window_count=Case(
                When(new_window, then=Value(1)), default=F("heartbeat_window_count") + 1
            ),
            heartbeat_window_at=Case(
                When(new_window, then=Value(now)), default=F("heartbeat_window_at")
            ),
        )
    )
