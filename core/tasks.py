from celery import shared_task

import core.celery  # noqa: F401  (the configured app, before any task is sent)
from hangdesk.budget import TIME_BUDGET

from .services import worker_heartbeat_record

LIMITS = TIME_BUDGET.housekeeping_task


@shared_task(bind=True, soft_time_limit=LIMITS.soft_s, time_limit=LIMITS.hard_s)
def record_worker_heartbeat(self) -> None:
    worker_heartbeat_record(hostname=self.request.hostname or "unknown")
