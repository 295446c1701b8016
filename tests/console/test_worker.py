"""A task sent through the real broker is run by a real worker process."""

import pytest

from core.models import WorkerHeartbeat
from core.selectors import workers_are_stale
from core.tasks import record_worker_heartbeat
from tests.helpers import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_process_records_its_heartbeat(celery_worker_process):
    WorkerHeartbeat.objects.all().delete()
    assert workers_are_stale()
    sent = record_worker_heartbeat.delay()
    wait_for(
        lambda: f"[{sent.id}] succeeded" in celery_worker_process.log_path.read_text(),
        timeout=60,
        what="the worker to run the task sent through the broker",
    )
    heartbeat = WorkerHeartbeat.objects.get()
    assert heartbeat.hostname.startswith("test-worker-")
    assert not workers_are_stale()


def test_pages_warn_when_no_worker_has_been_seen(as_user, carol):
    page = as_user(carol).get("/").content.decode()
    assert "No Celery worker has reported yet" in page
