"""A Slurm job id is enough, on real Slurm: the lab's ranks run under slurmctld / slurmd -N /
srun, the console asks the login node which nodes the job has, registers them, snapshots
exactly those, and the verdict quotes Slurm's own word on the task that died. Every refusal
(unknown, finished, pending job, unreachable controller, a node missing from known_hosts)
says why and writes nothing."""

from __future__ import annotations

import re
import shlex
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.importing import cluster_import
from clusters.models import Node
from collectors.bundles import read_bundle_bytes
from collectors.models import Snapshot, SnapshotStatus
from core.services import api_token_create
from incidents.models import Incident
from lab import slurm as slurmlab
from tests.helpers import wait_for
from watch import configure as watch_configure
from watch import period as watch_period
from watch.models import Watch, WatchRaise

# Only the tests that need a real worker flush the database after them (transaction=True).
pytestmark = [pytest.mark.lab, pytest.mark.django_db]
with_worker = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def slurm_lab(lab_factory):
    missing = slurmlab.preflight()
    if missing:
        pytest.fail(f"real Slurm is needed: {missing}")  # scripts/system-packages installs it
    lab = lab_factory("rank-exit", slurm=True)
    out = (
        lab.state_dir / "nodes" / "lab-node-0" / "log" / f"slurm-{lab.info['slurm']['job_id']}.out"
    )
    wait_for(  # the job hangs: rank 3 is gone (srun says so), the others wait in all_reduce
        lambda: out.exists() and "task 3: Killed" in out.read_text(),
        timeout=90,
        what="rank 3's exit",
    )
    yield lab
    assert lab.down() == []


def _sbatch(lab, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": lab.info["slurm"]["conf"]}
    done = subprocess.run(
        ["sbatch", "--parsable", "-N", "1", "-o", "/dev/null", *args],
        capture_output=True, text=True, timeout=30, env=env, check=True,
    )  # fmt: skip
    return done.stdout.strip().split(";")[0]


def _state(lab, job: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/sbin", "SLURM_CONF": lab.info["slurm"]["conf"]}
    out = subprocess.run(
        ["scontrol", "show", "job", "-o", job], capture_output=True, text=True, env=env, timeout=20
    ).stdout  # fmt: skip
    return next((f[9:] for f in out.split() if f.startswith("JobState=")), "")


def _slurm_cluster(lab, **changes):
    spec = {**lab.info["cluster"], **changes}
    return cluster_import({"cluster": spec, "nodes": []}).cluster


def _api(user):
    client = APIClient()
    _, secret = api_token_create(user=user, name="test")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@with_worker
def test_an_incident_opened_with_only_a_job_id_snapshots_its_nodes_and_quotes_slurm(
    slurm_lab, celery_worker_process, bob
):
    cluster = _slurm_cluster(slurm_lab)
    job = slurm_lab.info["slurm"]["job_id"]
    response = _api(bob).post(
        "/api/v1/incidents/",
        {"title": "pretrain stuck", "cluster": cluster.name, "slurm_job": job},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["scheduler_job"] == job
    assert body["scheduler_job_info"]["state"] == "RUNNING"
    assert body["scheduler_job_info"]["node_list"] == "lab-node-[0-1]"
    # Exactly the job's nodes, registered from Slurm with known_hosts' keys (not the login).
    nodes = {n.name: n for n in cluster.nodes.all()}
    assert sorted(nodes) == ["lab-node-0", "lab-node-1"]
    assert [n["address"] for n in slurm_lab.nodes] == [nodes[n].address for n in sorted(nodes)]
    assert [n["host_key"] for n in slurm_lab.nodes] == [nodes[n].host_key for n in sorted(nodes)]

    snapshot = Snapshot.objects.get(incident_id=body["id"])
    wait_for(lambda: _done(snapshot), timeout=150, what="the snapshot's diagnosis")
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    assert sorted(snapshot.collections.values_list("node_name", flat=True)) == sorted(nodes)
    assert snapshot.scheduler["job"]["id"] == job
    diagnosis = snapshot.diagnosis
    assert diagnosis["classification"] == "A"
    assert diagnosis["suspect_ranks"] == [3]
    quoted = "\n".join(str(e) for e in diagnosis["evidence"])
    assert "srun: error: lab-node-1: task 3: Killed" in quoted
    events = Incident.objects.get(pk=body["id"]).events.values_list("summary", flat=True)
    assert any(e.startswith(f"Slurm job {job} (hangdesk-lab, root, partition lab)") for e in events)


@with_worker
def test_the_form_opens_from_a_job_id_the_head_shows_the_job_and_exports_carry_it(
    slurm_lab, celery_worker_process, client, bob
):
    cluster = _slurm_cluster(slurm_lab)
    job = slurm_lab.info["slurm"]["job_id"]
    client.force_login(bob)
    form = {"title": "loss flat", "cluster": cluster.pk, "severity": "SEV2"}
    refused = client.post("/incidents/new/", {**form, "slurm_job": "999999"})
    assert refused.status_code == 200 and "knows no job 999999" in refused.content.decode()
    assert not Incident.objects.exists()

    opened = client.post("/incidents/new/", {**form, "slurm_job": job})
    assert opened.status_code == 302
    incident = Incident.objects.get()
    page = client.get(incident.get_absolute_url()).content.decode()
    assert f"Slurm job <strong>{job}</strong>" in page and "lab-node-[0-1]" in page
    first = Snapshot.objects.get(incident=incident)
    wait_for(lambda: _done(first), timeout=150, what="the first snapshot")

    # The page's button snapshots the job again, reading it anew on a worker.
    client.post(f"/incidents/{incident.pk}/snapshots/")
    second = Snapshot.objects.exclude(pk=first.pk).get(incident=incident)
    assert sorted(second.collections.values_list("node_name", flat=True)) == [
        "lab-node-0",
        "lab-node-1",
    ]
    wait_for(lambda: _done(second), timeout=150, what="the second snapshot")
    bundle = client.get(f"/snapshots/{second.pk}/bundle/")
    assert bundle.status_code == 200
    evidence = read_bundle_bytes(
        b"".join(bundle.streaming_content if bundle.streaming else [bundle.content])
    )
    assert evidence.scheduler["job"]["id"] == job
    assert evidence.scheduler["job"]["state"] == "RUNNING"


def _done(snapshot) -> bool:
    snapshot.refresh_from_db()
    return not snapshot.is_active


def _refused(cluster, job: str) -> str:
    before = (Incident.objects.count(), list(Node.objects.values_list("name", "host_key")))
    with pytest.raises(CommandError) as refused:
        call_command("snapshot", cluster.name, "--slurm-job", job)
    after = (Incident.objects.count(), list(Node.objects.values_list("name", "host_key")))
    assert after == before  # nothing written: no incident, no node
    return str(refused.value)


def test_a_job_id_slurm_does_not_know_is_refused(slurm_lab):
    cluster = _slurm_cluster(slurm_lab)
    assert "knows no job 999999" in _refused(cluster, "999999")
    assert "is not a Slurm job id" in _refused(cluster, "12; scancel 1")


def test_a_finished_and_a_pending_job_are_refused_saying_so(slurm_lab):
    cluster = _slurm_cluster(slurm_lab)
    finished = _sbatch(slurm_lab, "--wrap", "true")
    wait_for(lambda: _state(slurm_lab, finished) == "COMPLETED", timeout=60, what="a short job")
    assert f"Slurm job {finished} is COMPLETED" in _refused(cluster, finished)
    held = _sbatch(slurm_lab, "--hold", "--wrap", "sleep 60")
    message = _refused(cluster, held)
    assert f"Slurm job {held} is PENDING" in message and "no nodes to snapshot yet" in message


def test_an_unreachable_controller_is_refused(slurm_lab):
    cluster = _slurm_cluster(slurm_lab, name="lab-closed", controller_port=_closed_port())
    message = _refused(cluster, slurm_lab.info["slurm"]["job_id"])
    assert "Cannot ask the Slurm controller" in message and "unreachable" in message


def test_a_node_missing_from_known_hosts_is_refused(slurm_lab, tmp_path):
    partial = tmp_path / "known_hosts"
    lines = open(slurm_lab.info["known_hosts"]).read().splitlines()  # noqa: SIM115
    partial.write_text(lines[0] + "\n")  # node 0 only
    cluster = _slurm_cluster(slurm_lab, name="lab-partial", known_hosts_path=str(partial))
    message = _refused(cluster, slurm_lab.info["slurm"]["job_id"])
    assert "no host key" in message and "lab-node-1" in message
    assert "never trusts a key on first use" in message
    assert not cluster.nodes.exists()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    time.sleep(0.1)
    return port


def _tick(watch) -> str:
    """One watch period, run here under a fresh claim (the beat's dispatch, without beat)."""
    claim = f"test-{time.monotonic_ns()}"
    Watch.objects.filter(pk=watch.pk).update(
        claim=claim, claimed_until=timezone.now() + timedelta(minutes=5)
    )
    outcome = watch_period.watch_tick(watch_id=watch.pk, claim=claim)
    assert outcome.ran
    return outcome.state


def test_the_watch_raises_on_a_job_running_with_no_step_and_stops_on_one_that_ended(slurm_lab, bob):
    stuck = _sbatch(slurm_lab, "--wrap", "sleep 300")  # a batch script that never runs srun
    wait_for(lambda: _state(slurm_lab, stuck) == "RUNNING", timeout=60, what="the stuck job")
    # The nodes also run the lab's own (hung) ranks: a pattern that matches none of them, so
    # the stall seen is the job's own (no step), not the ranks' steps.
    cluster = _slurm_cluster(slurm_lab, name="lab-watch", process_pattern="no-such-trainer")
    watch = watch_configure.watch_configure(
        cluster=cluster, by=bob, enabled=True, step_time_multiplier=5, floor_s=1,
        checkpoint_allowance_s=0, slurm_job=stuck,
    )  # fmt: skip
    _tick(watch)  # the first period sees no step: the clock starts
    time.sleep(1.5)
    assert _tick(watch) == "stalled"
    raised = WatchRaise.objects.get(watch=watch)
    assert "RUNNING with no step" in raised.summary
    assert raised.incident.scheduler_job == stuck
    assert cluster.nodes.count() == 1  # the job's one node, registered from Slurm

    finished = _sbatch(slurm_lab, "--wrap", "true")
    wait_for(lambda: _state(slurm_lab, finished) == "COMPLETED", timeout=60, what="a short job")
    done = _slurm_cluster(slurm_lab, name="lab-watch-done")
    watch = watch_configure.watch_configure(
        cluster=done, by=bob, enabled=True, step_time_multiplier=5, floor_s=1,
        checkpoint_allowance_s=0, slurm_job=finished,
    )  # fmt: skip
    assert _tick(watch) == "idle"
    watch.refresh_from_db()
    assert not watch.enabled and f"Slurm job {finished} ended: COMPLETED" in watch.state_reason
    assert not WatchRaise.objects.filter(watch=watch).exists()
    assert not Incident.objects.filter(cluster=done).exists()


@with_worker
def test_docs_slurm_commands_run_as_written_on_the_lab(slurm_lab, celery_worker_process, capsys):
    """docs/slurm.md's console lines, on this module's Slurm lab (its nodes.json and job)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "slurm.md").read_text()
    block = re.search(r"```sh\n(.*?)```", doc, re.S).group(1)
    lines = [line for line in block.splitlines() if " manage.py " in line]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line.split(" manage.py ", 1)[1])
        argv = [
            str(slurm_lab.state_dir / "nodes.json") if a == ".lab/nodes.json" else a for a in argv
        ]
        call_command(*argv)
    assert "A:" in capsys.readouterr().out  # the snapshot's verdict: a rank left
    assert Snapshot.objects.get().scheduler["job"]["id"] == slurm_lab.info["slurm"]["job_id"] == "1"
