"""The lab as the tests use it, registered for every suite by tests/conftest.py: a factory
that brings labs up and always tears them down, and a small SSH helper (paramiko, host keys
checked against the lab's known_hosts)."""

from __future__ import annotations

import json
import os
import pickle
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import paramiko
import pytest

import analysis
from analysis.evidence import SnapshotEvidence
from clusters.sshspec import NodeTarget
from collectors.visits import ssh_visit
from hangdesk.plan import CollectionPlan
from lab import cluster
from tests.helpers import free_port_pair, wait_for

# Fast settings for tests: the fault comes at step 5 (~2.5 s of training), the watchdog dumps
# the flight recorder 5 s after the last completed step.
FAST = {"fault_step": 5, "step_time": 0.4, "watchdog_timeout": 5.0}
SSH_TIMEOUT = 20


@dataclass
class Lab:
    """A running lab as the console sees it: the node JSON, plus SSH access to its nodes."""

    info: dict
    state_dir: Path
    master_port: int = 29500
    _clients: dict[int, paramiko.SSHClient] = field(default_factory=dict)

    @property
    def nodes(self) -> list[dict]:
        return self.info["nodes"]

    @property
    def expected(self) -> dict:
        return self.info["expected"]

    def node_of(self, rank: int) -> int:
        return rank // (self.info["cluster"]["world_size"] // len(self.nodes))

    def ssh(self, node: int) -> paramiko.SSHClient:
        if node not in self._clients:
            n = self.nodes[node]
            client = paramiko.SSHClient()
            client.load_host_keys(self.info["known_hosts"])
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            client.connect(
                n["address"], port=n["port"], username=n["username"],
                key_filename=n["key_path"], look_for_keys=False, allow_agent=False,
                timeout=SSH_TIMEOUT, banner_timeout=SSH_TIMEOUT, auth_timeout=SSH_TIMEOUT,
            )  # fmt: skip
            self._clients[node] = client
        return self._clients[node]

    def run(self, node: int, command: str, timeout: float = 60) -> tuple[int, str, str]:
        _, out, err = self.ssh(node).exec_command(command, timeout=timeout)
        # Close each channel: sshd allows 10 open sessions per connection (MaxSessions).
        with out.channel:
            text = out.read().decode(errors="replace")
            errors = err.read().decode(errors="replace")
            return out.channel.recv_exit_status(), text, errors

    def read(self, node: int, path: str) -> bytes:
        with self.ssh(node).open_sftp() as sftp, sftp.open(path, "rb") as f:
            return f.read()

    def listdir(self, node: int, path: str) -> list[str]:
        with self.ssh(node).open_sftp() as sftp:
            return sorted(sftp.listdir(path))

    def rank_pids(self, node: int) -> dict[int, int]:
        """rank -> pid of the training processes on a node, found the way the console finds
        them: the process pattern over `ps` args, then RANK from /proc/<pid>/environ."""
        pattern = re.compile(self.info["cluster"]["process_pattern"])
        _, ps, _ = self.run(node, "ps -eo pid=,args=")
        out = {}
        for line in ps.splitlines():
            pid, _, args = line.strip().partition(" ")
            if pattern.search(args) and not args.startswith(("bash", "ps ")):
                env = self.environ(node, int(pid))
                if "RANK" in env:
                    out[int(env["RANK"])] = int(pid)
        return out

    def environ(self, node: int, pid: int) -> dict[str, str]:
        code, text, _ = self.run(node, f"cat /proc/{pid}/environ")
        if code != 0:
            return {}
        return dict(kv.split("=", 1) for kv in text.split("\0") if "=" in kv)

    def pyspy(self, node: int, pid: int) -> str:
        """The main thread's frames (function names, innermost first) of `py-spy dump`."""
        cmd = f"{self.info['cluster']['pyspy_command']} dump --pid {pid}"
        code, text, err = self.run(node, cmd, timeout=60)
        assert code == 0, f"py-spy failed on node {node} pid {pid}: {err}"
        main = text.split('"MainThread"', 1)[1].split("\nThread ", 1)[0]
        return main

    def stacks(self) -> dict[int, str]:
        """rank -> main-thread stack, for every rank that is alive."""
        out = {}
        for node in range(len(self.nodes)):
            for rank, pid in self.rank_pids(node).items():
                out[rank] = self.pyspy(node, pid)
        return out

    def log(self, rank: int) -> str:
        node = self.node_of(rank)
        return self.read(node, f"/var/log/train/rank{rank}.log").decode(errors="replace")

    def last_step(self, rank: int) -> int:
        steps = re.findall(rf"\[rank{rank}\] host=\S+ step=(\d+) ", self.log(rank))
        return int(steps[-1]) if steps else 0

    def flight_recorder(self, rank: int) -> dict | None:
        node = self.node_of(rank)
        name = f"trace_rank_{rank}"
        if name not in self.listdir(node, "/var/log/train/fr"):
            return None
        return pickle.loads(self.read(node, f"/var/log/train/fr/{name}"))  # noqa: S301

    def wait_for_dumps(self, ranks: list[int], timeout: float = 60) -> dict[int, dict]:
        def all_there():
            dumps = {r: self.flight_recorder(r) for r in ranks}
            return dumps if all(dumps.values()) else None

        return wait_for(all_there, timeout=timeout, what=f"flight-recorder dumps of {ranks}")

    def collect(self, **plan_options) -> SnapshotEvidence:
        """One snapshot of every node, taken the way the console takes it (ssh_visit);
        `plan_options` change the plan (sample_seconds=0: no sampling window)."""
        cluster_info = self.info["cluster"]
        plan = CollectionPlan(
            process_pattern=cluster_info["process_pattern"],
            log_globs=cluster_info["log_globs"],
            flight_recorder_globs=cluster_info["flight_recorder_globs"],
            pyspy_command=cluster_info["pyspy_command"],
            **plan_options,
        )
        targets = [
            NodeTarget(
                name=n["name"], address=n["address"], port=n["port"], username=n["username"],
                key_path=n["key_path"], host_key=n["host_key"],
            )
            for n in self.nodes
        ]  # fmt: skip
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            nodes = list(pool.map(lambda target: ssh_visit(target, plan).evidence, targets))
        return SnapshotEvidence(
            nodes=nodes,
            expected_world_size=cluster_info["world_size"],
            collected_at=datetime.now(UTC),
            cluster=cluster_info["name"],
        )

    def diagnose(self, gap_s: float = 3.0, **plan_options) -> dict:
        """The console's verdict from two snapshots `gap_s` apart (slow vs dead needs two)."""
        first = self.collect(**plan_options)
        time.sleep(gap_s)
        return analysis.diagnose(self.collect(**plan_options), previous=first).to_json()

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def down(self) -> list[str]:
        self.close()
        return cluster.down(self.state_dir)


def require_lab() -> None:
    """Skip (naming what is missing) where the lab cannot run; under CI, fail instead."""
    missing = cluster.preflight(light=False)
    if missing:
        reason = "the lab cannot run here, it needs: " + "; ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)  # CI must prove the lab, never skip it
        pytest.skip(reason)


@pytest.fixture(scope="session")
def lab_factory(tmp_path_factory):
    """lab_factory(scenario, **options) -> Lab. Every lab it made is torn down at the end of
    the session even if a test failed; call lab.down() earlier to free the machine."""
    require_lab()
    made: list[Lab] = []

    def make(scenario: str, **options) -> Lab:
        state_dir = tmp_path_factory.mktemp(f"lab-{scenario}")
        # A free rendezvous port, so a test lab never collides with the demo lab of `make run`.
        options.setdefault("master_port", free_port_pair())
        opts = cluster.LabOptions(scenario=scenario, state_dir=state_dir, **{**FAST, **options})
        info = cluster.up(opts)
        assert json.loads((state_dir / "nodes.json").read_text()) == info
        lab = Lab(info, state_dir, master_port=opts.master_port)
        made.append(lab)
        return lab

    yield make
    for lab in made:
        lab.down()


@pytest.fixture(scope="session")
def hung_rank_exit_lab(lab_factory):
    """The default rank-exit lab (rank 3 SIGKILLed at the fault step), once every live rank's
    watchdog has dumped: ranks 0-2 then wait in the all_reduce for hours (a 6 h process-group
    timeout). Brought up once for the whole session and shared by the tests that only observe
    it (SSH reads, snapshots, bundles); a test that kills, writes or restarts anything on a
    lab brings up its own."""
    lab = lab_factory("rank-exit")
    expected = lab.expected
    alive = [r for r in range(expected["world_size"]) if r not in expected["missing_ranks"]]
    lab.wait_for_dumps(alive, timeout=90)
    yield lab
    assert lab.down() == []
