"""up / down / status: clean teardown, recovery after a crash, light mode at scale."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cgroups, cluster, demo
from tests.helpers import free_port_pair, wait_for
from tests.labkit import FAST, Lab, require_lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _listening(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1):
            return True
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        out += [int(k) for k in kids]
        todo += [int(k) for k in kids]
    return out


def test_cli_up_status_down_leaves_nothing_behind(tmp_path_factory):
    require_lab()
    state = tmp_path_factory.mktemp("lab-cli")
    py = [sys.executable, "-m", "lab", "--state-dir", str(state)]
    up = subprocess.run(
        [*py, "up", "--scenario", "oom", "--fault-step", "3", "--step-time", "0.3"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)
        assert info == json.loads((state / "nodes.json").read_text())
        assert {"process_pattern", "world_size", "log_globs", "pyspy_command"} <= set(
            info["cluster"]
        )
        status = json.loads(
            subprocess.run(
                [*py, "status", "--json"], cwd=REPO, capture_output=True, text=True, timeout=60
            ).stdout
        )
        assert status["running"] and all(n["sshd"] for n in status["nodes"])
        lab_state = json.loads((state / "lab-state.json").read_text())
        pids = [n["init_pid"] for n in lab_state["nodes"]]
        everything = pids + [d for p in pids for d in _descendants(p)]
        assert len(everything) >= 2 * (1 + 1 + 2)  # per node: init, sshd, 2 ranks
        assert lab_state["cgroups"] and Path(lab_state["cgroups"][0]).exists()
    finally:
        down = subprocess.run([*py, "down"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(p) for p in everything)
    assert not any(_listening(n["address"], 22) for n in info["nodes"])
    assert not cgroups.lab_root(lab_state["lab_id"]).exists()
    assert not (state / "lab-state.json").exists()
    again = subprocess.run([*py, "down"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0  # idempotent


def test_up_after_a_crash_cleans_leftovers_first(lab_factory):
    lab = lab_factory("healthy")
    old = json.loads((lab.state_dir / "lab-state.json").read_text())
    # As if the controlling process died: the state file and every process are still there.
    # A free rendezvous port, as lab_factory gives: 29500 up is the demo's, and other labs'.
    opts = cluster.LabOptions(
        scenario="healthy", state_dir=lab.state_dir, master_port=free_port_pair(), **FAST
    )
    info = cluster.up(opts)
    assert not any(_alive(n["init_pid"]) for n in old["nodes"])
    fresh = Lab(info, lab.state_dir)
    try:
        assert fresh.run(0, "hostname")[1].strip() == "lab-node-0"
        assert fresh.nodes[0]["host_key"] != lab.nodes[0]["host_key"]  # new keys per up
    finally:
        assert fresh.down() == []


def test_addresses_per_lab(tmp_path):
    a = cluster.node_addresses(cluster.LabOptions(nodes=3, state_dir=tmp_path / "a"))
    assert len(set(a)) == 3 and all(x.startswith("127.") and x.endswith(".1." + x[-1]) for x in a)
    assert a == cluster.node_addresses(cluster.LabOptions(nodes=3, state_dir=tmp_path / "a"))
    chosen = cluster.LabOptions(nodes=300, base_address="127.42.1.250", state_dir=tmp_path)
    many = cluster.node_addresses(chosen)
    assert many[:6] == [f"127.42.1.{x}" for x in range(250, 255)] + ["127.42.2.1"]
    assert len(set(many)) == 300 and not any(x.endswith((".0", ".255")) for x in many)
    with pytest.raises(cluster.LabError):
        cluster.node_addresses(cluster.LabOptions(base_address="10.0.0.1", state_dir=tmp_path))


def test_a_second_lab_takes_the_next_free_rendezvous_port(tmp_path):
    """torch's TCPStore binds *:MASTER_PORT: a lab whose default port another lab (or anything)
    holds on any address moves to the next free pair instead of failing to start."""
    opts = cluster.LabOptions(state_dir=tmp_path)
    first = cluster._pick_master_port(opts)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the TCPStore does
        holder.bind(("0.0.0.0", first))  # noqa: S104 - what a running lab's TCPStore does
        holder.listen()
        second = cluster._pick_master_port(opts)
        assert second not in (first, first - 1) and second >= cluster.DEFAULT_MASTER_PORT
        with pytest.raises(cluster.LabError, match="taken"):
            cluster._pick_master_port(cluster.LabOptions(state_dir=tmp_path, master_port=first))


def test_light_mode_many_nodes(lab_factory):
    nodes = int(os.environ.get("HANGDESK_LAB_LIGHT_NODES", "16"))
    lab = lab_factory("rank-exit", light=True, nodes=nodes, ranks_per_node=1)
    assert lab.info["mode"] == "light" and lab.info["cluster"]["world_size"] == nodes
    last = nodes - 1
    try:
        dumps = lab.wait_for_dumps([0, last - 1], timeout=60)
        assert dumps[0]["entries"][-1]["profiling_name"] == "gloo:all_reduce"
        assert lab.rank_pids(last) == {}
        launcher = lab.read(last, "/var/log/train/launcher.log").decode()
        assert f"rank {last} (pid " in launcher and "exitcode 137" in launcher
        stack = lab.pyspy(0, lab.rank_pids(0)[0])
        assert (
            stack.lstrip().startswith("_wait_forever") and "all_reduce (lab/light_train.py" in stack
        )
        assert lab.run(last - 1, "hostname")[1].strip() == f"lab-node-{last - 1}"
    finally:
        assert lab.down() == []


def test_preflight_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cluster, "SSHD", "/nonexistent/sshd")
    missing = " ".join(cluster.preflight(light=True))
    assert "root" in missing and "/nonexistent/sshd" in missing
    result = demo.start_demo(state_dir=Path("/nonexistent-lab"))
    assert not result.ok and "root" in result.message and result.nodes_json is None


def test_demo_lab(tmp_path_factory):
    require_lab()
    state = tmp_path_factory.mktemp("demo")
    result = demo.start_demo(state_dir=state, wait_hung=True)
    try:
        assert result.ok, result.message
        info = json.loads(Path(result.nodes_json).read_text())
        assert info["expected"]["classification"] == "A"
        lab = Lab(info, state)
        wait_for(lambda: lab.flight_recorder(0), timeout=5, what="dump of rank 0")
        # Starting it again reuses the running lab instead of restarting it.
        assert demo.start_demo(state_dir=state).nodes_json == result.nodes_json
        lab.close()
    finally:
        assert demo.stop_demo(state_dir=state) == []
