"""The node farm as the tests use it: a small farm per fault, started in its own process
group and stopped by its pid, and a collection of every node the way the console visits one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from analysis.evidence import SnapshotEvidence
from clusters.sshspec import NodeTarget
from collectors.visits import ssh_visit
from hangdesk.plan import CollectionPlan
from lab import farm
from tests.helpers import free_port

CI_NODES = 50


def plan_of(info: dict, **options) -> CollectionPlan:
    c = info["cluster"]
    return CollectionPlan(
        process_pattern=c["process_pattern"],
        log_globs=c["log_globs"],
        flight_recorder_globs=c["flight_recorder_globs"],
        pyspy_command=c["pyspy_command"],
        **options,
    )


def target_of(node: dict, **changes) -> NodeTarget:
    fields = {k: node[k] for k in ("name", "address", "port", "username", "key_path", "host_key")}
    return NodeTarget(**{**fields, **changes})


def collect_all(info: dict) -> tuple[SnapshotEvidence, list]:
    plan = plan_of(info)
    with ThreadPoolExecutor(max_workers=64) as pool:
        visits = list(pool.map(lambda n: ssh_visit(target_of(n), plan), info["nodes"]))
    evidence = SnapshotEvidence(
        nodes=[v.evidence for v in visits],
        expected_world_size=info["cluster"]["world_size"],
        collected_at=datetime.now(UTC),
        cluster="farm",
    )
    return evidence, visits


def assert_planted_fault(diagnosis, expected: dict) -> None:
    """The verdict names the fault the farm planted (farm_nodes.expected)."""
    assert diagnosis.classification == expected["classification"]
    if expected["fault"] == "node-down":
        assert expected["fault_node"] in diagnosis.summary
        assert set(expected["unobserved_ranks"]) <= set(diagnosis.unobserved_ranks)
    else:
        assert list(diagnosis.suspect_ranks) == expected["suspect_ranks"]
    assert list(diagnosis.missing_ranks) == expected.get("missing_ranks", [])


@pytest.fixture(scope="session")
def farm_factory(tmp_path_factory):
    """farm_factory(fault, nodes=50, **options) -> lab.farm.RunningFarm; every farm it started
    is stopped (by pid) at the end of the session."""
    started: list[farm.RunningFarm] = []

    def make(fault: str, *, nodes: int = CI_NODES, **options) -> farm.RunningFarm:
        opts = farm.FarmOptions(
            nodes=nodes, fault=fault, port=free_port(), lifetime_s=900,
            state_dir=tmp_path_factory.mktemp(f"farm-{fault}"), **options,
        )  # fmt: skip
        running = farm.launch(opts)
        started.append(running)
        return running

    yield make
    for running in started:
        running.stop()
