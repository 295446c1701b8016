"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.dev")

app = Celery("hangdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def announce_worker(sender, **kwargs) -> None:
    """Record a heartbeat as soon as a worker is up, not 30 s later at beat's first tick."""
    from console.services import worker_heartbeat_record

    worker_heartbeat_record(hostname=sender.hostname)
