"""The console's web process under faults, served as `make run` serves it (manage.py
runserver, a real process on loopback) on the test database.

- PostgreSQL restarted between requests (through a TCP proxy this test cuts and restores,
  never the machine's shared cluster): while it is down a page is a 500 and the process stays
  up; once it is back the very next request is served, no restart needed, and nothing written
  before is lost (connections are not kept between requests: CONN_MAX_AGE 0).
- 50 concurrent page views during a snapshot (real workers collecting from a real sshd with a
  slow py-spy): every view is served, the snapshot still finishes, its evidence stored once.
  Latency figures are printed (docs/performance.md records them); no wall-clock assertion.
"""

from __future__ import annotations

import statistics
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.db import connection
from django.urls import reverse

from clusters.importing import cluster_import
from collectors.models import Artifact, NodeCollection, NodeStatus, Snapshot, SnapshotStatus
from collectors.starts import snapshot_start
from incidents.services import incident_add_note, incident_open
from tests.helpers import free_port, wait_for

from . import procs
from .tcpproxy import TcpProxy

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class Web:
    def __init__(self, tmp_path, database_url: str) -> None:
        self.port = free_port()
        env = procs.celery_env(DATABASE_URL=database_url)
        args = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"]
        self.process = procs.start(args, tmp_path / "web.log", env)
        wait_for(self._up, timeout=60, what="the web server")

    def _up(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/login/", timeout=5)
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    def get(self, path: str, session: str) -> tuple[int, float, bytes]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", headers={"Cookie": f"sessionid={session}"}
        )
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 (http, loopback)
                body, status = response.read(), response.status
        except urllib.error.HTTPError as exc:
            body, status = exc.read(), exc.code
        return status, time.perf_counter() - started, body


def _database_url(port: int) -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db.get('USER') or 'postgres'}{password}@127.0.0.1:{port}/{db['NAME']}"


@pytest.fixture
def session(client, bob):
    client.force_login(bob)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _require_postgres():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (the suite runs on SQLite here): a restart is its fault")


def test_postgres_restarted_between_requests(tmp_path, session, bob, cluster):
    _require_postgres()
    db = connection.settings_dict
    proxy = TcpProxy((db.get("HOST") or "127.0.0.1", int(db.get("PORT") or 5432))).start()
    web = Web(tmp_path, _database_url(proxy.port))
    try:
        incident = incident_open(opened_by=bob, title="database restart drill", cluster=cluster)
        incident_add_note(incident=incident, by=bob, text="written before the restart")
        page = reverse("pages:incident", args=[incident.pk])
        status, _, body = web.get(page, session)
        assert status == 200 and b"written before the restart" in body

        proxy.cut()  # the database goes away
        status, _, _ = web.get(page, session)
        assert status == 500  # what the responder sees while it is down
        assert web.process.poll() is None  # the web process survives it

        proxy.restore()  # the database is back
        status, _, body = web.get(page, session)
        assert status == 200, "the very next request must be served, no restart"
        assert b"written before the restart" in body
    finally:
        procs.stop(web.process)
        proxy.cut()


def _slow_cluster(sshd, ranks, tmp_path, name: str):
    slow = tmp_path / "slow-py-spy"
    plan = ranks.plan()
    slow.write_text(f'#!/bin/sh\nsleep 3\nexec {plan.pyspy_command} "$@"\n')
    slow.chmod(0o755)
    target = sshd.target()
    node = {"address": target.address, "port": target.port, "username": target.username,
            "key_path": target.key_path, "host_key": target.host_key}  # fmt: skip
    return cluster_import({
        "cluster": {"name": name, "process_pattern": plan.process_pattern,
                    "log_globs": list(plan.log_globs), "pyspy_command": str(slow),
                    "flight_recorder_globs": list(plan.flight_recorder_globs)},
        "nodes": [{"name": "n0", **node}, {"name": "n1", **node}],
    }).cluster  # fmt: skip


def test_fifty_concurrent_page_views_during_a_snapshot(
    tmp_path, session, bob, sshd, ranks, celery_worker_process
):
    web = Web(tmp_path, procs.celery_env()["DATABASE_URL"])
    try:
        cluster = _slow_cluster(sshd, ranks, tmp_path, "busy")
        incident = incident_open(opened_by=bob, title="t", cluster=cluster)
        page = reverse("pages:incident", args=[incident.pk])
        live = reverse("pages:incident_live", args=[incident.pk])
        web.get(page, session)  # warm
        snapshot, _ = snapshot_start(incident=incident, by=bob)
        wait_for(
            lambda: NodeCollection.objects.filter(snapshot=snapshot, status="running").exists(),
            timeout=60,
            what="a node being collected",
        )
        paths = [page if i % 2 == 0 else live for i in range(50)]
        with ThreadPoolExecutor(max_workers=50) as pool:
            results = list(pool.map(lambda p: web.get(p, session), paths))
        during = Snapshot.objects.get(pk=snapshot.pk).status
        statuses = [status for status, _, _ in results]
        assert statuses == [200] * 50
        times = sorted(took for _, took, _ in results)
        print(
            f"\n50 concurrent views (status {during} at the end): median "
            f"{statistics.median(times):.2f} s, p95 {times[47]:.2f} s, max {times[-1]:.2f} s"
        )
        wait_for(
            lambda: Snapshot.objects.get(pk=snapshot.pk).status == SnapshotStatus.DONE,
            timeout=120,
            what="the snapshot to finish",
        )
        collections = NodeCollection.objects.filter(snapshot=snapshot)
        assert {c.status for c in collections} == {NodeStatus.OK}
        for collection in collections:  # stored once, not twice
            names = list(Artifact.objects.filter(collection=collection).values_list("name"))
            assert len(names) == len(set(names))
    finally:
        procs.stop(web.process)
