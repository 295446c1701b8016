"""The Celery app every task module runs on. Configuration comes from Django settings
(CELERY_* names).

Task modules import this module, so the configured app exists before any task is sent; it is
not imported at start-up, so a command that sends no task never loads Celery (~0.14 s).
`celery -A console` reaches it through console/celery.py, the project's entry point.
"""

import functools
import logging
from pathlib import Path

from celery import Celery
from celery.signals import worker_ready
from kombu.transport import redis as kombu_redis

log = logging.getLogger(__name__)


def _connection_gone(qos) -> bool:
    connection = qos.channel.connection
    return connection is None or connection.client is None


def _unacked_survive_a_lost_connection() -> None:
    """A worker holding an unacknowledged message (a running task, acks late; a countdown
    task waiting for its time) when Redis restarts must reconnect, not die. kombu 5.7 closes
    the lost connection first and then restores those messages through it, and acks a task
    that finishes after the reconnect on the old, closed channel: both raise AttributeError
    (the channel's client is gone) out of the consumer, "Unrecoverable error", and the worker
    exits. Nothing is lost by skipping both: Redis keeps every unacknowledged message in its
    unacked hash and a worker restores it once the visibility timeout has passed (our tasks
    are idempotent: a redelivered one finds its work claimed or done)."""
    qos = kombu_redis.QoS
    if getattr(qos, "survives_lost_connection", False):
        return
    restore, ack = qos.restore_unacked, qos.ack

    @functools.wraps(restore)
    def restore_unacked(self, client=None):
        if client is None and _connection_gone(self):
            log.warning(
                "broker connection lost: %d unacknowledged message(s) come back after the "
                "visibility timeout",
                len(self._delivered),
            )
            self._delivered.clear()
            return None
        return restore(self, client)

    @functools.wraps(ack)
    def ack_or_leave(self, delivery_tag):
        if _connection_gone(self):
            log.warning(
                "a message of a lost broker connection finished: left unacknowledged, it "
                "comes back after the visibility timeout"
            )
            return None
        return ack(self, delivery_tag)

    qos.restore_unacked, qos.ack = restore_unacked, ack_or_leave
    qos.survives_lost_connection = True


_unacked_survive_a_lost_connection()

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
