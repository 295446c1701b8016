"""A Slurm job id is enough, on real Slurm: the lab's ranks run under slurmctld / slurmd -N /
srun, the console asks the login node which nodes the job has, registers them, snapshots
exactly those, and the verdict quotes Slurm's own word on the task that died. Every refusal
(unknown, finished, pending job, unreachable controller, a node missing from known_hosts)
says why and writes nothing."""

from __future__ import annotations

import subprocess
import time

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from clusters.importing import cluster_import
from clusters.models import Node
from collectors.bundles import read_bundle_bytes
from collectors.models import Snapshot, SnapshotStatus
from core.services import api_token_create
from incidents.models import Incident
from lab import slurm as slurmlab
from tests.helpers import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def slurm_lab(lab_factory):
    missing = slurmlab.preflight()
    if missing:
        pytest.fail(f"real Slurm is needed: {missing}")  # scripts/system-packages installs it
    lab = lab_factory("rank-exit", slurm=True)
    lab.wait_for_dumps([0, 1, 2], timeout=90)  # the job hangs: its peers dumped
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
