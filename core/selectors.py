from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from .models import WorkerHeartbeat


def worker_last_seen() -> WorkerHeartbeat | None:
    return WorkerHeartbeat.objects.order_by("-seen_at").first()


def workers_are_stale() -> bool:
    last = worker_last_seen()
    limit = timedelta(seconds=settings.WORKER_STALE_AFTER_SECONDS)
    return last is None or timezone.now() - last.seen_at > limit
