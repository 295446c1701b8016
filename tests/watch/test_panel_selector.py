"""The watch panel's one read (watch/selectors.watch_panel): what it shows of a small watched
cluster, in a number of queries that grows with neither nodes, heartbeats nor raises."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from clusters.services import node_create
from incidents.services import incident_open
from tests.conftest import HOST_KEY
from watch import configure
from watch.models import Heartbeat, PreflightRun, StepSample, WatchRaise
from watch.selectors import watch_panel

pytestmark = pytest.mark.django_db


def _watched(cluster, now):
    watch = configure.watch_for(cluster)
    watch.enabled = True
    watch.last_step, watch.last_step_at = 1200, now - timedelta(seconds=30)
    watch.checked_at = now - timedelta(seconds=5)
    watch.nodes = {"gpu-0": {"seen_at": (now - timedelta(seconds=5)).isoformat(),
                             "processes": 8, "steps": True, "read_logs": True,
                             "bytes": 4096, "seconds": 0.2}}  # fmt: skip
    watch.save()
    return watch


def _raise(watch, bob, at, *, closed: bool = True):
    """A raise (one open per watch: the others closed a minute after they were raised)."""
    incident = incident_open(opened_by=bob, title="hang", cluster=watch.cluster, severity="SEV2")
    return WatchRaise.objects.create(
        watch=watch, incident=incident, reason="stalled", summary="no step", raised_at=at,
        closed_at=at + timedelta(minutes=1) if closed else None,
    )  # fmt: skip


def _queries(cluster, now) -> int:
    with CaptureQueriesContext(connection) as queries:
        watch_panel(cluster, now=now)
    return len(queries)


def test_an_unwatched_cluster_shows_only_its_preflight(cluster):
    preflight = PreflightRun.objects.create(
        cluster=cluster, at=timezone.now(), source="ssh", ok=True, report={"summary": "agree"}
    )
    panel = watch_panel(cluster)
    assert panel.watch is None and panel.preflight == preflight and panel.cluster == cluster
    assert panel.nodes == [] and panel.heartbeats == [] and panel.figure is None


def test_the_panel_shows_each_node_the_heartbeats_the_chart_and_the_last_raise(cluster, bob):
    now = timezone.now()
    watch = _watched(cluster, now)
    Heartbeat.objects.create(watch=watch, rank=3, step=1199, at=now - timedelta(seconds=10))
    Heartbeat.objects.create(watch=watch, rank=-1, step=1200, at=now - timedelta(seconds=2))
    StepSample.objects.create(watch=watch, at=now - timedelta(minutes=2), step=1100)
    _raise(watch, bob, now - timedelta(hours=2))
    last = _raise(watch, bob, now - timedelta(minutes=1), closed=False)
    panel = watch_panel(cluster, now=now)
    assert [n["name"] for n in panel.nodes] == ["gpu-0", "gpu-1"]
    assert panel.nodes[0]["age_s"] == pytest.approx(5) and panel.nodes[0]["processes"] == 8
    assert panel.nodes[1]["age_s"] is None and panel.nodes[1]["steps"] is False  # never read
    assert [(h["rank"], h["step"]) for h in panel.heartbeats] == [(None, 1200), (3, 1199)]
    assert panel.last_step_age_s == pytest.approx(30) and panel.checked_age_s == pytest.approx(5)
    assert panel.last_raise == last and panel.has_samples
    assert set(panel.context()) >= {"cluster", "watch", "nodes", "figure", "last_raise"}


def test_the_panel_reads_in_queries_that_do_not_grow_with_the_cluster(cluster, bob):
    now = timezone.now()
    watch = _watched(cluster, now)
    Heartbeat.objects.create(watch=watch, rank=0, step=1, at=now)
    _raise(watch, bob, now - timedelta(minutes=5))
    small = _queries(cluster, now)
    for index in range(10, 30):
        node_create(cluster=cluster, name=f"gpu-{index}", address=f"127.0.9.{index}", port=22,
                    username="root", key_path="", host_key=HOST_KEY)  # fmt: skip
    for rank in range(1, 40):
        Heartbeat.objects.create(watch=watch, rank=rank, step=rank, at=now)
    for minutes in range(1, 30):
        StepSample.objects.create(watch=watch, at=now - timedelta(minutes=minutes), step=minutes)
        _raise(watch, bob, now - timedelta(minutes=5 + minutes))
    assert _queries(cluster, now) == small == 6
    panel = watch_panel(cluster, now=now)
    assert len(panel.nodes) == 22 and len(panel.heartbeats) == 40


def test_the_rendered_panel_does_not_query_per_raise(as_user, carol, cluster, bob):
    now = timezone.now()
    watch = _watched(cluster, now)
    client = as_user(carol)
    url = f"/clusters/{cluster.name}/watch/"
    _raise(watch, bob, now - timedelta(minutes=5), closed=False)
    client.get(url)
    with CaptureQueriesContext(connection) as before:
        client.get(url)
    for minutes in range(1, 10):
        _raise(watch, bob, now - timedelta(minutes=5 + minutes))
    with CaptureQueriesContext(connection) as after:
        page = client.get(url).content.decode()
    assert len(after) == len(before)
    assert "Last raise" in page and "(open)" in page


def test_the_settings_form_is_a_responders_and_reading_it_writes_nothing(cluster):
    from watch.models import Watch
    from watch.selectors import watch_settings

    assert watch_settings(cluster, responder=False, admin=False).form is None
    with CaptureQueriesContext(connection) as queries:
        page = watch_settings(cluster, responder=True, admin=False)
    assert len(queries) == 1 and not Watch.objects.exists()  # a cluster never watched
    defaults = Watch(cluster=cluster)
    assert page.form.initial["floor_s"] == defaults.floor_s and not page.form.is_bound
    assert page.form.fields["webhook_url"].disabled
    watch = configure.watch_for(cluster)
    watch.floor_s, watch.step_nodes = 123, ["gpu-0", "gpu-1"]
    watch.save()
    page = watch_settings(cluster, responder=True, admin=True, data={"floor_s": "9"})
    assert page.form.initial["floor_s"] == 123 and page.form.initial["step_nodes"] == "gpu-0, gpu-1"
    assert page.form.is_bound and not page.form.fields["webhook_url"].disabled
    assert set(page.context()) == {"cluster", "form"}
