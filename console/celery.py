"""`celery -A console`: the project's entry to the Celery app (core/celery.py), with the
settings module this project runs with by default, and the command lines of its workers."""

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings.prod")

from core.celery import app

__all__ = ["app", "worker_command"]


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
