"""A Ray job id is enough, on real Ray: the lab runs Ray 2.60 (a head on lab-node-0, `ray
start --address` on lab-node-1) in a network namespace of its own whose only interface is lo,
and a Ray Train TorchTrainer (gloo, CPU) whose rank 1 is SIGKILLed at step 5 while rank 0
waits in the all_reduce. The console asks the head which processes the job's workers are,
snapshots exactly those by pid, and the verdict quotes Ray's own word on the worker that died.
A finished job, an unknown or malformed one and an unreachable head are refused with the
reason and change nothing. One Ray lab serves every test of this module."""

from __future__ import annotations

import re
import shlex
import socket
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from clusters.importing import cluster_import
from clusters.models import Node
from collectors.bundles import read_bundle_bytes
from collectors.models import Snapshot, SnapshotStatus
from core.services import api_token_create
from incidents.models import Incident
from lab import raylab
from tests.helpers import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db]
with_worker = pytest.mark.django_db(transaction=True)
JOB = "hdlab-job"


@pytest.fixture(scope="module")
def ray_lab(lab_factory):
    missing = raylab.preflight()
    if missing:
        pytest.fail(f"the Ray lab needs {missing}")  # scripts/system-packages installs them
    lab = lab_factory("rank-exit", ray=True, ranks_per_node=1)
    # Ray, not the lab, places the ranks: rank 0's log is on whichever node runs its worker.
    rank0 = lab.state_dir / "nodes" / lab.info["ray"]["workers"]["0"]["node"] / "log" / "rank0.log"
    wait_for(  # rank 1 is gone; rank 0 waited in all_reduce past its watchdog
        lambda: "Watchdog caught collective operation timeout" in rank0.read_text(),
        timeout=90,
        what="rank 0 stuck in all_reduce",
    )
    yield lab
    assert lab.down() == []


def _setup(lab) -> raylab.RaySetup:
    nodes = {n["name"]: n["address"] for n in lab.nodes}
    return raylab.RaySetup(
        root=lab.state_dir / "ray", netns_pid=lab.info["ray"]["netns_pid"], netns_fd=-1,
        nodes=nodes,
    )  # fmt: skip


def _ray_cluster(lab, **changes):
    return cluster_import({"cluster": {**lab.info["cluster"], **changes}, "nodes": []}).cluster


def test_every_socket_of_the_lab_s_ray_is_on_loopback(ray_lab):
    report = ray_lab.info["ray"]["sockets"]  # checked by `up`, before the job was submitted
    assert report["interfaces"] == ["lo"] and report["outside"] == []
    assert {s["kind"] for s in report["listening"]} <= {"loopback", "wildcard"}
    ports = {int(s["address"].rsplit(":", 1)[1]) for s in report["listening"]}
    assert raylab.HEAD_PORTS["gcs"] in ports and 6379 not in ports
    # Again now that the job's workers listen too, and Ray names only lab addresses.
    state = raylab.json.loads((ray_lab.state_dir / "lab-state.json").read_text())
    live = raylab.check_sockets(_setup(ray_lab), [n["init_pid"] for n in state["nodes"]])
    assert len(live["listening"]) > len(report["listening"])
    listed = raylab.cli(_setup(ray_lab), "list", "nodes", "--format", "json")
    assert sorted(re.findall(r'"node_ip": "([\d.]+)"', listed)) == sorted(
        n["address"] for n in ray_lab.nodes
    )
    assert all(a.startswith("127.") for a in re.findall(r"\d+\.\d+\.\d+\.\d+", listed))


@with_worker
def test_an_incident_opened_with_only_a_ray_job_snapshots_its_workers_and_quotes_ray(
    ray_lab, celery_worker_process, bob, client
):
    cluster = _ray_cluster(ray_lab)
    api = APIClient()
    _, secret = api_token_create(user=bob, name="test")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = api.post(
        "/api/v1/incidents/",
        {"title": "loss flat", "cluster": cluster.name, "ray_job": JOB},
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    job = body["scheduler_job_info"]
    assert body["scheduler_job"] == JOB and job["kind"] == "ray" and job["state"] == "RUNNING"
    assert (job["name"], job["workers"], job["dead"]) == (JOB, 2, 1)
    # The job's nodes, registered at Ray's addresses with the keys of the lab's known_hosts.
    nodes = {n.address: n for n in cluster.nodes.all()}
    assert sorted(nodes) == sorted(n["address"] for n in ray_lab.nodes)
    assert {nodes[n["address"]].host_key for n in ray_lab.nodes} == {
        n["host_key"] for n in ray_lab.nodes
    }

    snapshot = Snapshot.objects.get(incident_id=body["id"])
    wait_for(lambda: _done(snapshot), timeout=180, what="the snapshot's diagnosis")
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    workers = ray_lab.info["ray"]["workers"]
    # Exactly the workers' processes, by pid: rank 0 on the node Ray placed it on; none left
    # on the node of rank 1 (SIGKILLed).
    listed = {c.node_name: _ps_pids(c) for c in snapshot.collections.all()}
    alive, gone = (nodes[workers[rank]["ip"]].name for rank in ("0", "1"))
    assert listed == {alive: [workers["0"]["pid"]], gone: []}

    diagnosis = snapshot.whole_diagnosis()
    assert diagnosis["classification"] == "A", diagnosis["summary"]
    assert diagnosis["suspect_ranks"] == [1]
    quoted = "\n".join(str(e) for e in diagnosis["evidence"])
    assert f"Ray Train worker world_rank=1 pid={workers['1']['pid']}" in quoted
    assert "The actor is dead because its worker process has died" in quoted
    rows = {row["rank"]: row for row in diagnosis["per_rank"]}
    assert rows[0]["frame"].startswith("all_reduce")  # its training thread, not Ray's loop

    incident = Incident.objects.get(pk=body["id"])
    events = incident.events.values_list("summary", flat=True)
    assert any(e.startswith(f"Ray job {JOB} (Ray Train run {JOB}") for e in events)
    client.force_login(bob)
    page = client.get(incident.get_absolute_url()).content.decode()
    assert f"Ray job <strong>{JOB}</strong>" in page and "1 dead" in page
    bundle = client.get(f"/snapshots/{snapshot.pk}/bundle/")
    evidence = read_bundle_bytes(
        b"".join(bundle.streaming_content if bundle.streaming else [bundle.content])
    )
    assert evidence.scheduler["kind"] == "ray" and evidence.scheduler["job"]["id"] == JOB


def _ps_pids(collection) -> list[int]:
    ps = collection.artifacts.get(name="ps.txt").content.decode()
    return [int(line.split()[0]) for line in ps.splitlines()[1:] if line.strip()]


def _done(snapshot) -> bool:
    snapshot.refresh_from_db()
    return not snapshot.is_active


def _refused(cluster, job: str) -> str:
    before = (Incident.objects.count(), list(Node.objects.values_list("name", "host_key")))
    with pytest.raises(CommandError) as refused:
        call_command("snapshot", cluster.name, "--ray-job", job)
    after = (Incident.objects.count(), list(Node.objects.values_list("name", "host_key")))
    assert after == before  # nothing written: no incident, no node
    return str(refused.value)


def test_a_finished_unknown_or_malformed_job_and_an_unreachable_head_are_refused(ray_lab):
    cluster = _ray_cluster(ray_lab)
    done = raylab.cli(
        _setup(ray_lab), "job", "submit", f"--address={_setup(ray_lab).dashboard}",
        "--submission-id=hdlab-done", "--", "python", "-c", "print(42)", timeout=180,
    )  # fmt: skip
    assert "succeeded" in done
    message = _refused(cluster, "hdlab-done")
    assert "Ray job hdlab-done is SUCCEEDED" in message and "it has ended" in message
    assert "Ray knows no job no-such-run" in _refused(cluster, "no-such-run")
    assert "is not a Ray job" in _refused(cluster, "x; ray stop")
    closed = _ray_cluster(ray_lab, name="lab-ray-closed", controller_port=_closed_port())
    message = _refused(closed, JOB)
    assert "Cannot ask the Ray head" in message and "unreachable" in message


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    time.sleep(0.1)
    return port


@with_worker
def test_docs_ray_commands_run_as_written_on_the_lab(ray_lab, celery_worker_process, capsys):
    """docs/ray.md's console lines, on this module's Ray lab (its nodes.json and job)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "ray.md").read_text()
    block = re.search(r"```sh\n(.*?)```", doc, re.S).group(1)
    lines = [line for line in block.splitlines() if " manage.py " in line]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line.split(" manage.py ", 1)[1])
        nodes_json = str(ray_lab.state_dir / "nodes.json")
        call_command(*[nodes_json if a == ".lab/nodes.json" else a for a in argv])
    assert "A:" in capsys.readouterr().out  # the snapshot's verdict: a rank left
    assert Snapshot.objects.get().scheduler["job"]["id"] == JOB
