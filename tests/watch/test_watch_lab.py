"""The watch against the lab, end to end: a real beat (every 2 s, console/settings/test.py),
the real workers, SSH into lab nodes running a real torch job. A healthy job raises nothing; a
hang opens exactly one incident with two snapshots and the lab's verdict, and pages a loopback
receiver (a failing one is retried); a straggler is slow, not dead; preflight catches env-drift
and passes a clean lab.

Timing: generous deadlines on polling only (the machine has 2 cores and the lab's 4 ranks
share them); the delays measured (hang to incident, hang to verdict) are printed for
docs/performance.md and held to the threshold plus a period with slack for a loaded machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from datetime import datetime

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from clusters.importing import cluster_import
from collectors.models import Snapshot, SnapshotStatus
from incidents.models import Incident
from tests.conftest import _database_url_of
from tests.helpers import wait_for
from tests.watch.receiver import Receiver
from watch import configure
from watch.models import NotifyStatus, StepSample, Watch, WatchRaise

pytestmark = [pytest.mark.lab, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

FLOOR_S = 8.0  # the threshold here: 5 x 0.4 s steps is under it
# A loaded 2-core machine: a period's task may start late and a snapshot takes seconds.
SLACK_S = 20.0


@pytest.fixture(scope="module")
def beat(django_db_setup, django_db_blocker, tmp_path_factory, celery_worker_process):
    """Celery beat on the test database with the suite's settings (the watch every 2 s)."""
    folder = tmp_path_factory.mktemp("watch-beat")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings.test",
        "DATABASE_URL": _database_url_of(connection.settings_dict),
    }
    log_path = folder / "beat.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO",
             "--schedule", str(folder / "schedule")],
            cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    wait_for(lambda: b"beat: Starting" in log_path.read_bytes(), timeout=60, what="beat")
    yield process
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _watch(lab, bob, webhook_url: str = ""):
    from django.contrib.auth import get_user_model

    cluster = cluster_import(lab.info).cluster
    # Where the page goes is an admin's setting; the rest a responder's.
    by = get_user_model().objects.create_superuser("ops", password="ops-pw") if webhook_url else bob
    return configure.watch_configure(
        cluster=cluster, by=by, enabled=True, step_time_multiplier=5, floor_s=FLOOR_S,
        checkpoint_allowance_s=60, webhook_url=webhook_url,
    )  # fmt: skip


def _hang_at(lab) -> datetime:
    """When the last globally completed step was logged: the moment the job stopped."""
    step = lab.expected["last_global_step"]
    stamps = []
    for rank in range(lab.expected["world_size"]):
        for line in lab.log(rank).splitlines():
            if f"[rank{rank}] " in line and f" step={step} " in line:
                stamps.append(datetime.fromisoformat(line[:23].replace(",", ".") + "+00:00"))
    assert stamps, f"no rank logged step {step}"
    return max(stamps)


def _periods(watch: Watch, count: int, timeout: float = 120) -> None:
    seen: set[datetime] = set()

    def enough():
        checked = Watch.objects.get(pk=watch.pk).checked_at
        if checked:
            seen.add(checked)
        return len(seen) >= count

    wait_for(enough, timeout=timeout, interval=0.5, what=f"{count} watch periods")


def _assert_one_raise_with_verdict(lab, watch: Watch, receiver: Receiver) -> dict:
    raised = wait_for(
        lambda: WatchRaise.objects.filter(watch=watch, verdict_at__isnull=False).first(),
        timeout=240, interval=1, what="a raise with its verdict",
    )  # fmt: skip
    wait_for(
        lambda: WatchRaise.objects.get(pk=raised.pk).notify_status == NotifyStatus.SENT,
        timeout=60, what="the page to reach the receiver",
    )  # fmt: skip
    _periods(watch, 3)  # more periods go by: still one raise, one incident
    raised.refresh_from_db()
    expected = lab.expected
    incidents = Incident.objects.filter(cluster=watch.cluster)
    assert incidents.count() == 1 and WatchRaise.objects.filter(watch=watch).count() == 1
    snapshots = Snapshot.objects.filter(incident=raised.incident)
    assert snapshots.count() == 2
    assert {s.pk for s in snapshots} == {raised.first_snapshot_id, raised.second_snapshot_id}
    assert set(snapshots.values_list("status", flat=True)) == {SnapshotStatus.DONE}
    verdict = raised.verdict
    assert verdict["snapshot"] == raised.second_snapshot_id
    assert verdict["classification"] == expected["classification"], verdict
    assert verdict["suspect_ranks"] == expected["suspect_ranks"], verdict
    body = receiver.posts[-1]["body"]
    assert body["hangdesk"]["classification"] == expected["classification"]
    assert f"/incidents/{raised.incident_id}/" in body["text"]
    hang = _hang_at(lab)
    to_incident = (raised.incident.opened_at - hang).total_seconds()
    to_verdict = (raised.verdict_at - hang).total_seconds()
    measured = {
        "scenario": lab.info["scenario"],
        "reason": raised.reason,
        "threshold_s": raised.threshold_s,
        "hang_to_incident_s": round(to_incident, 1),
        "hang_to_verdict_s": round(to_verdict, 1),
        "webhook_attempts": raised.notify_attempts,
    }
    print("WATCH-DELAY " + json.dumps(measured))
    assert 0 < to_incident <= raised.threshold_s + settings.WATCH_PERIOD_S + SLACK_S, measured
    return measured


def test_a_healthy_job_raises_nothing_and_passes_preflight(lab_factory, beat, bob, capsys):
    lab = lab_factory("healthy")
    try:
        watch = _watch(lab, bob)
        _periods(watch, 6)
        watch.refresh_from_db()
        assert watch.state == "ok", watch.state_reason
        assert watch.step_time_s and 0.2 < watch.step_time_s < 2.0
        assert watch.nodes["lab-node-0"]["steps"] and watch.nodes["lab-node-1"]["processes"] == 2
        assert not watch.nodes["lab-node-1"]["read_logs"]  # presence check only there
        cost = {n: {k: v[k] for k in ("bytes", "seconds")} for n, v in watch.nodes.items()}
        steps = list(StepSample.objects.filter(watch=watch).values_list("step", flat=True))
        assert len(steps) >= 5 and steps[-1] > steps[0] and steps == sorted(steps)
        assert not WatchRaise.objects.exists() and not Incident.objects.exists()
        call_command("preflight", watch.cluster.name, "--json")  # no SystemExit: they agree
        report = json.loads(capsys.readouterr().out)
        assert report["ok"] and report["ranks"] == [0, 1, 2, 3], report["summary"]
        with capsys.disabled():
            print("WATCH-COST " + json.dumps(cost))
    finally:
        assert lab.down() == []


def test_a_rank_that_exits_is_seen_gone_at_once(lab_factory, beat, bob):
    # The fault comes at step 25 (~10 s of training): the watch has seen every rank by then.
    lab = lab_factory("rank-exit", fault_step=25)
    try:
        with Receiver() as receiver:
            watch = _watch(lab, bob, receiver.url)
            measured = _assert_one_raise_with_verdict(lab, watch, receiver)
            assert measured["reason"] == "gone" and len(receiver.posts) == 1
    finally:
        assert lab.down() == []


def test_a_dataloader_stall_is_a_stall(lab_factory, beat, bob):
    lab = lab_factory("dataloader-stall")
    try:
        with Receiver() as receiver:
            watch = _watch(lab, bob, receiver.url)
            measured = _assert_one_raise_with_verdict(lab, watch, receiver)
            assert measured["reason"] == "stalled" and len(receiver.posts) == 1
    finally:
        assert lab.down() == []


def test_collective_mismatch_with_a_failing_receiver_is_retried(lab_factory, beat, bob):
    lab = lab_factory("collective-mismatch")
    try:
        with Receiver(statuses=[500]) as receiver:
            watch = _watch(lab, bob, receiver.url)
            measured = _assert_one_raise_with_verdict(lab, watch, receiver)
            assert [p["status"] for p in receiver.posts] == [500, 200]
            assert measured["webhook_attempts"] == 2
            assert receiver.times[1] - receiver.times[0] >= settings.WATCH_WEBHOOK_BACKOFF_S * 0.9
    finally:
        assert lab.down() == []


def test_a_straggler_is_slow_not_dead(lab_factory, beat, bob):
    lab = lab_factory("straggler")
    try:
        watch = _watch(lab, bob)
        wait_for(
            lambda: Watch.objects.get(pk=watch.pk).state == "slow",
            timeout=120, interval=0.5, what="the watch to call the job slow",
        )  # fmt: skip
        _periods(watch, 4)
        watch.refresh_from_db()
        assert watch.state in ("slow", "ok"), watch.state_reason
        assert watch.recent_step_time_s > 2 * watch.step_time_s
        assert not WatchRaise.objects.exists() and not Incident.objects.exists()
    finally:
        assert lab.down() == []


def test_preflight_catches_env_drift(lab_factory, capsys):
    lab = lab_factory("env-drift")
    try:
        cluster = cluster_import(lab.info).cluster
        with pytest.raises(SystemExit) as exited:
            call_command("preflight", cluster.name, "--json")
        assert exited.value.code == 1
        report = json.loads(capsys.readouterr().out)
        drift = {d["name"]: d for d in report["env_diffs"]}
        assert list(drift) == ["NCCL_SOCKET_IFNAME"], report["summary"]
        nodes = {v["value"]: v["nodes"] for v in drift["NCCL_SOCKET_IFNAME"]["values"]}
        assert nodes["lo"] == ["lab-node-0"] and nodes[next(v for v in nodes if v != "lo")] == [
            "lab-node-1"
        ]
        assert {s["node"] for s in report["shell_init"]} == {"lab-node-1"}
        assert report["ranks"] == [0, 1, 2, 3]
    finally:
        assert lab.down() == []


def test_a_job_stuck_in_init_is_raised_as_an_init_hang(lab_factory, beat, bob):
    """The lab's init-hang: one node's ranks use a wrong MASTER_PORT, every rank waits in
    init_process_group and no step ever comes. The stacks the watch reads while it waits put
    every rank in init, so the floor applies, not the init threshold (set far off here)."""
    lab = lab_factory("init-hang")
    try:
        with Receiver() as receiver:
            watch = _watch(lab, bob, receiver.url)
            Watch.objects.filter(pk=watch.pk).update(init_threshold_s=3600)
            raised = wait_for(
                lambda: WatchRaise.objects.filter(watch=watch, verdict_at__isnull=False).first(),
                timeout=300, interval=1, what="an init raise with its verdict",
            )  # fmt: skip
            assert raised.reason == "init" and raised.step is None
            assert raised.threshold_s == FLOOR_S  # the floor: every rank seen inside init
            assert "init_process_group" in raised.summary
            snapshots = Snapshot.objects.filter(incident=raised.incident)
            assert {s.pk for s in snapshots} == {
                raised.first_snapshot_id,
                raised.second_snapshot_id,
            }
            assert set(snapshots.values_list("status", flat=True)) == {SnapshotStatus.DONE}
            verdict = raised.verdict
            assert verdict["classification"] == lab.expected["classification"] == "init", verdict
            wait_for(
                lambda: WatchRaise.objects.get(pk=raised.pk).notify_status == NotifyStatus.SENT,
                timeout=60, what="the page to reach the receiver",
            )  # fmt: skip
            enabled_at = Watch.objects.get(pk=watch.pk).enabled_at
            measured = {
                "scenario": "init-hang",
                "threshold_s": raised.threshold_s,
                "watch_on_to_incident_s": round((raised.raised_at - enabled_at).total_seconds(), 1),
                "watch_on_to_verdict_s": round((raised.verdict_at - enabled_at).total_seconds(), 1),
            }
            print("WATCH-INIT " + json.dumps(measured))
    finally:
        assert lab.down() == []
