from celery import shared_task

import core.celery  # noqa: F401  (the configured app, before any task is sent)

from .services import worker_heartbeat_record


@shared_task(bind=True, time_limit=30, soft_time_limit=20)
def record_worker_heartbeat(self) -> None:
    worker_heartbeat_record(hostname=self.request.hostname or "unknown")
