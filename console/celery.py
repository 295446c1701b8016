"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os
import sys
from pathlib import Path

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.dev")

app = Celery("hangdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def make_file_broker_folders(sender, source, **kwargs) -> None:
    """The filesystem broker (no REDIS_URL) needs its folders before the first message is
    sent or read; they are made here, when a process first uses Celery, not by the settings."""
    if not str(source.broker_url or "").startswith("filesystem://"):
        return
    options = source.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)


def worker_command(name: str, *, hostname: str = "", concurrency: int = 0) -> list[str]:
    """The command line of worker `name` of settings.HANGDESK_WORKERS (its queues, its
    processes unless `concurrency` says), as `make run` and the worker tests start it."""
    from django.conf import settings

    layout = settings.HANGDESK_WORKERS[name]
    return [
        sys.executable, "-m", "celery", "-A", "console", "worker", "--pool", "prefork",
        "-Q", ",".join(layout["queues"]),
        "--concurrency", str(concurrency or layout["concurrency"]),
        "--hostname", hostname or f"{name}@%h", "--loglevel", "INFO",
    ]  # fmt: skip


@worker_ready.connect
def announce_worker(sender, **kwargs) -> None:
    """Record a heartbeat as soon as a worker is up, not 30 s later at beat's first tick."""
    from console.services import worker_heartbeat_record

    worker_heartbeat_record(hostname=sender.hostname)
