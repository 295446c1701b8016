"""Queues by workload: node visits ("ssh"), the final verdicts ("analysis"), the work before the
last node ("early": first verdicts, the GPU metrics read from the click) and housekeeping
("default") each have a consumer; analyses that hold every analysis process do not delay a
snapshot's node visits, and GPU reads that hold every early process do not delay a verdict."""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from bench.bench_analysis import build_snapshot
from clusters.services import cluster_create
from collectors import gpuclick, services
from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.tasks import analyse_snapshot, read_gpu_metrics
from console.celery import app
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot
from tests.helpers import wait_for
from tests.security.servers import LineServer
from tests.snapshotkit import refused_snapshot


def _queue_of(task: str) -> str:
    return app.amqp.router.route({}, task)["queue"].name


def test_each_workload_has_its_queue_and_every_queue_a_worker():
    assert _queue_of("collectors.tasks.collect_nodes") == "ssh"
    assert _queue_of("collectors.tasks.analyse_snapshot") == "analysis"
    assert _queue_of("collectors.tasks.analyse_with_gpu_metrics") == "analysis"
    for before_the_last_node in ("analyse_provisional", "analyse_provisional_at_deadline",
                                 "read_gpu_metrics"):  # fmt: skip
        assert _queue_of(f"collectors.tasks.{before_the_last_node}") == "early"
    assert _queue_of("collectors.tasks.read_parses_ahead") == "ahead"
    assert _queue_of("collectors.tasks.fail_stale_collections") == "default"
    assert _queue_of("core.tasks.record_worker_heartbeat") == "default"
    # The watch's SSH work beside the snapshots' visits; its bookkeeping with beat's.
    assert _queue_of("watch.tasks.watch_cluster") == "ssh"
    assert _queue_of("watch.tasks.preflight_cluster") == "ssh"
    assert _queue_of("watch.tasks.watch_dispatch") == "default"
    assert _queue_of("watch.tasks.watch_notify") == "default"
    consumed = [q for worker in settings.HANGDESK_WORKERS.values() for q in worker["queues"]]
    assert sorted(consumed) == ["ahead", "analysis", "default", "early", "ssh"]  # each once
    for worker in settings.HANGDESK_WORKERS.values():
        assert not {"ssh", "analysis"} <= set(worker["queues"])
        assert not {"early", "analysis"} <= set(worker["queues"])
        assert worker["queues"] == ["ahead"] or "ahead" not in worker["queues"]


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def _locker() -> psycopg.Connection:
    """A second connection to the test database, to hold row locks the workers wait for."""
    db = connection.settings_dict
    return psycopg.connect(
        dbname=db["NAME"],
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        host=db["HOST"] or None,
        port=db["PORT"] or None,
    )


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_busy_analyses_do_not_delay_a_snapshots_node_visits(celery_worker_process, bob):
    if connection.vendor != "postgresql":
        pytest.skip("holds row locks on PostgreSQL (the suite's database under CI)")
    bundles = []
    for index in range(3):  # more than the analysis worker's two processes
        incident = incident_open(
            opened_by=bob, title=f"big {index}", cluster=cluster_create(name=f"big-{index}")
        )
        bundles.append(
            services.snapshot_store_bundle(incident=incident, evidence=load_snapshot("mismatch"))
        )
    locker = _locker()
    try:
        # Each analysis runs, then waits to store its verdict for as long as the lock is held:
        # an analysis as long as this test wants.
        locker.execute(
            "SELECT id FROM collectors_snapshot WHERE id = ANY(%s) FOR UPDATE",
            [[s.pk for s in bundles]],
        )
        for snapshot in bundles:
            analyse_snapshot.delay(snapshot.pk)
        wait_for(lambda: _lock_waiters() >= 2, timeout=60, what="both analysis processes busy")

        snapshot = refused_snapshot(bob, "refusing")
        # Refused, retried once after the budget's delay, then failed: the visit is over.
        visit = wait_for(
            lambda: NodeCollection.objects.filter(
                snapshot=snapshot, status=NodeStatus.FAILED, attempts=2
            ).first(),
            timeout=60,
            what="the node visit while every analysis process is busy",
        )
        assert visit.reason.startswith("unreachable: connection refused")
        assert _lock_waiters() >= 2  # the analyses were held the whole time
        assert set(
            Snapshot.objects.filter(pk__in=[s.pk for s in bundles]).values_list("status", flat=True)
        ) == {SnapshotStatus.ANALYSING}
    finally:
        locker.close()  # the held analyses go on
    everything = [*bundles, snapshot]
    wait_for(
        lambda: (
            Snapshot.objects.filter(
                pk__in=[s.pk for s in everything], status=SnapshotStatus.DONE
            ).count()
            == len(everything)
        ),
        timeout=120,
        what="every analysis to finish once released",
    )


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_gpu_reads_holding_every_early_process_do_not_delay_a_verdict(celery_worker_process, bob):
    # A Prometheus that takes each query and never answers: each read waits out its timeout
    # (GPU_METRICS_TIMEOUT_S, 10 s a query), holding its process all that time.
    with LineServer(b"") as silent:
        held = []
        for index in range(2):  # the early worker's two processes
            cluster = cluster_create(name=f"gpu-hung-{index}")
            incident = incident_open(opened_by=bob, title=f"gpu {index}", cluster=cluster)
            snapshot = services.snapshot_store_bundle(
                incident=incident, evidence=build_snapshot(8, 1, stuck_rank=3)
            )
            cluster.prometheus_url = f"http://127.0.0.1:{silent.port}"
            cluster.save(update_fields=["prometheus_url"])
            Snapshot.objects.filter(pk=snapshot.pk).update(gpu_metrics=gpuclick.READING)
            read_gpu_metrics.delay(snapshot.pk)
            held.append(snapshot.pk)
        wait_for(lambda: silent.accepted >= 2, timeout=60, what="both GPU reads held")

        incident = incident_open(opened_by=bob, title="hung", cluster=cluster_create(name="big"))
        target = services.snapshot_store_bundle(
            incident=incident, evidence=load_snapshot("mismatch")
        )
        analyse_snapshot.delay(target.pk)
        done = wait_for(
            lambda: Snapshot.objects.filter(pk=target.pk, status=SnapshotStatus.DONE).first(),
            timeout=60,
            what="the verdict while both GPU reads are held",
        )
        # Made while both reads still waited on Prometheus: on the analysis worker's
        # processes, not behind them.
        assert set(Snapshot.objects.filter(pk__in=held).values_list("gpu_metrics", flat=True)) == {
            gpuclick.READING
        }
        assert done.diagnosis["classification"]
    # The server closed, both reads end and store their state: waited for here, so that no
    # task still writes while the test's teardown empties the tables (a TRUNCATE beside a
    # worker's UPDATE deadlocked there once).
    wait_for(
        lambda: not Snapshot.objects.filter(pk__in=held, gpu_metrics=gpuclick.READING).exists(),
        timeout=60,
        what="both held GPU reads ended",
    )
