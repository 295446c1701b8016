from datetime import datetime

from django.utils import timezone

from .models import WorkerHeartbeat


def worker_heartbeat_record(*, hostname: str, at: datetime | None = None) -> WorkerHeartbeat:
    heartbeat, _ = WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"seen_at": at or timezone.now()}
    )
    return heartbeat
