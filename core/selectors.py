from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import WorkerHeartbeat


def worker_last_seen() -> WorkerHeartbeat | None:
    return WorkerHeartbeat.objects.order_by("-seen_at").first()


def workers_are_stale() -> bool:
    return heartbeat_is_stale(worker_last_seen())


def heartbeat_is_stale(last: WorkerHeartbeat | None) -> bool:
    """No worker has reported within WORKER_STALE_AFTER_SECONDS (or none ever has)."""
    limit = timedelta(seconds=settings.WORKER_STALE_AFTER_SECONDS)
    return last is None or timezone.now() - last.seen_at > limit
