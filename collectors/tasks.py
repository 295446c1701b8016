"""Thin tasks: take ids, call one service. They run on the "ssh" queue (settings)."""

from datetime import timedelta

from celery import shared_task

import console.celery  # noqa: F401  (the configured app, before any task is sent)

from . import remote, services


@shared_task(
    bind=True,
    autoretry_for=(remote.TransientCollectionError,),
    retry_backoff=2,
    retry_jitter=False,
    max_retries=services.MAX_ATTEMPTS - 1,
    soft_time_limit=150,
    time_limit=180,
)
def collect_node(self, collection_id: int) -> str | None:
    return services.node_collection_run(collection_id=collection_id, task_id=self.request.id)


@shared_task(soft_time_limit=240, time_limit=300)
def analyse_snapshot(snapshot_id: int) -> None:
    services.snapshot_analyse(snapshot_id=snapshot_id)


@shared_task(time_limit=60)
def fail_stale_collections() -> int:
    return services.node_collection_fail_stale(older_than=timedelta(minutes=10))
