"""The Celery app every task module runs on. Configuration comes from Django settings
(CELERY_* names).

Task modules import this module, so the configured app exists before any task is sent; it is
not imported at start-up, so a command that sends no task never loads Celery (~0.14 s).
`celery -A console` reaches it through console/celery.py, the project's entry point.
"""

from pathlib import Path

from celery import Celery
from celery.signals import worker_ready

app = Celery("hangdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def make_file_broker_folders(sender, source, **kwargs) -> None:
    """The filesystem broker (no REDIS_URL) needs its folders before the first message is
    sent or read; they are made here, when a process first uses Celery, not by the settings."""
    backend = str(source.result_backend or "")
    if backend.startswith("file://"):
        Path(backend.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    if not str(source.broker_url or "").startswith("filesystem://"):
        return
    options = source.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


@worker_ready.connect
def announce_worker(sender, **kwargs) -> None:
    """Record a heartbeat as soon as a worker is up, not 30 s later at beat's first tick."""
    from .services import worker_heartbeat_record

    worker_heartbeat_record(hostname=sender.hostname)
