"""Push mode on the lab: the cluster is marked push, and every lab node runs the README's
crash-handler lines as written (over the lab's own SSH, only as a way to run them there):
`hangdesk collect` gathers the node's evidence with the console's probe, `hangdesk upload` sends
it to a live console, whose real worker analyses the snapshot once both nodes are in. The
verdict is the one an SSH snapshot of the same hang gives."""

from __future__ import annotations

import shlex

import pytest
from rest_framework.test import APIClient

import analysis
from clusters.importing import cluster_import
from collectors.models import Snapshot, SnapshotStatus
from core.services import api_token_create
from tests.clikit import readme_block
from tests.helpers import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def test_pushed_bundles_give_the_verdict_of_an_ssh_snapshot(
    hung_rank_exit_lab, hangdesk_installed, celery_worker_process, live_server, bob
):
    lab = hung_rank_exit_lab  # hung: every live rank's watchdog has dumped
    expected = lab.expected
    over_ssh = analysis.diagnose(lab.collect()).to_json()  # the console's own SSH visit
    assert over_ssh["classification"] == expected["classification"] == "A"

    spec = {**lab.info["cluster"], "name": "lab-push", "source": "push", "expected_nodes": 2}
    cluster = cluster_import({"cluster": spec, "nodes": []}).cluster
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=bob, name='t')[1]}")
    opened = client.post(
        "/api/v1/incidents/",
        {"title": "lab stuck", "cluster": cluster.name, "snapshot": True},
        format="json",
    ).json()
    token = opened["snapshot"]["upload_token"]
    assert token.startswith("hds_")

    # The README's three lines, as written, on each node: PATH finds the installed hangdesk
    # (and the lab's py-spy), the environment carries the console, the token and the incident.
    lines = "\n".join(readme_block("tests/lab/test_push.py"))
    environment = {
        "PATH": f"{hangdesk_installed.bin}:{lab.info['cluster']['pyspy_command'].rsplit('/', 1)[0]}"
        ":/usr/sbin:/usr/bin:/sbin:/bin",
        "HANGDESK_URL": live_server.url,
        "HANGDESK_TOKEN": token,
        "HANGDESK_INCIDENT": str(opened["id"]),
    }
    assigned = " ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items())
    for node in range(len(lab.nodes)):
        code, out, err = lab.run(node, f"env {assigned} bash -c {shlex.quote(lines)}", timeout=120)
        assert code == 0, err
        assert "Traceback" not in err, err  # the installed command runs whole
        assert "(confidence " in out.splitlines()[0]  # the third line: this node's own verdict
        assert "hangdesk collect: lab-node-" in err and "hangdesk upload: lab-node-" in err, err
        assert f"{node + 1} of 2 nodes sent" in err

    snapshot = Snapshot.objects.get(incident_id=opened["id"])
    wait_for(lambda: not _active(snapshot), timeout=120, what="the pushed snapshot's verdict")
    assert snapshot.status == SnapshotStatus.DONE, snapshot.error
    pushed = snapshot.diagnosis
    for key in ("classification", "suspect_ranks", "missing_ranks", "last_completed_step"):
        assert pushed[key] == over_ssh[key], (key, pushed["summary"], over_ssh["summary"])
    assert pushed["suspect_nodes"] == over_ssh["suspect_nodes"] == [expected["suspect_node"]]
    assert sorted(snapshot.collections.values_list("node_name", flat=True)) == [
        "lab-node-0",
        "lab-node-1",
    ]


def _active(snapshot) -> bool:
    snapshot.refresh_from_db()
    return snapshot.is_active
