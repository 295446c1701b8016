"""The node farm answers the console's own visit (pinned host key, its key's login, the
probe) with captured lab output renumbered for its place, and the console's verdict on the
whole farm is the fault planted in it."""

from __future__ import annotations

import subprocess

import paramiko
import pytest

import analysis
from collectors.outcomes import FailureKind
from collectors.visits import ssh_visit
from lab import farm_nodes
from tests.farm.farmkit import assert_planted_fault, collect_all, plan_of, target_of
from tests.helpers import wait_for


@pytest.mark.parametrize("fault", ["rank-gone", "group-mismatch", "node-down"])
def test_the_console_finds_the_planted_fault(farm_factory, fault):
    running = farm_factory(fault)
    info, expected = running.info, running.info["expected"]
    evidence, visits = collect_all(info)
    failed = {v.evidence.node: v.failure for v in visits if v.failure}
    if fault == "node-down":
        assert list(failed) == [expected["fault_node"]]
        assert failed[expected["fault_node"]].kind is FailureKind.UNREACHABLE
    else:
        assert failed == {}
    diagnosis = analysis.diagnose(evidence)
    assert_planted_fault(diagnosis, expected)
    # The farm counts what it served (its stats file is rewritten every second).
    answered = len(info["nodes"]) - len(failed)
    wait_for(lambda: running.stats()["probes"] == answered, timeout=10, what="the farm's count")
    assert running.stats()["refused"] == 0


def test_every_node_is_renumbered_for_its_place(farm_factory):
    running = farm_factory("rank-gone", nodes=12)
    evidence, _ = collect_all(running.info)
    k = 8
    for index, node in enumerate(evidence.nodes):
        assert node.hostname == f"node-{index:04d}"
        ranks = sorted(
            int(dict(kv.split(b"=", 1) for kv in env.split(b"\0") if b"=" in kv)[b"RANK"])
            for env in node.environ.values()
        )
        alive = list(range(index * k, (index + 1) * k))
        assert set(ranks) <= set(alive) and len(ranks) >= k - 1
        assert all(f"rank{r}.log" in " ".join(node.logs) for r in alive)
        assert all(b"[0, 1, 2" in dump and b"95]" in dump for dump in node.flight_recorder.values())


def test_each_node_has_its_own_host_key_and_admits_only_the_farm_key(farm_factory, tmp_path):
    running = farm_factory("none", nodes=3)
    nodes = running.info["nodes"]
    assert len({n["host_key"] for n in nodes}) == 3
    plan = plan_of(running.info)
    swapped = ssh_visit(target_of(nodes[0], host_key=nodes[1]["host_key"]), plan)
    assert swapped.failure.kind is FailureKind.HOST_KEY
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    stranger = ssh_visit(target_of(nodes[0], key_path=str(other)), plan)
    assert stranger.failure.kind is FailureKind.AUTH


def test_it_runs_only_the_console_scripts(farm_factory):
    running = farm_factory("none", nodes=2)
    node = running.info["nodes"][0]
    client = paramiko.SSHClient()
    client.load_host_keys(running.info["known_hosts"])
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        node["address"], port=node["port"], username="root", key_filename=node["key_path"],
        look_for_keys=False, allow_agent=False, timeout=10,
    )  # fmt: skip
    try:
        _, out, err = client.exec_command("id")
        assert out.channel.recv_exit_status() == 126
        assert b"only the console's probe" in err.read()
    finally:
        client.close()
    wait_for(lambda: running.stats()["refused"] == 1, timeout=10, what="the refusal counted")


def test_the_fault_sits_on_neither_the_first_nor_the_last_node():
    assert [farm_nodes.fault_node_index(n) for n in (2, 3, 50, 1000)] == [1, 2, 33, 666]
