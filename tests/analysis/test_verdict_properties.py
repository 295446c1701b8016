"""Properties of the verdict over many bundles (issue 17, hypothesis):
- adding any stuck signal to a healthy bundle makes it not healthy;
- no bundle whose evidence names a rank or a node gets "unknown";
- shuffling the order of the nodes or renaming the hosts changes no verdict.
Derandomized: the same examples in every run, so a failure reproduces.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from analysis import diagnose
from analysis.evidence import NodeEvidence, SnapshotEvidence
from tests.analysis.synthetic import T0, Job, in_collective, outside

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

jobs = st.builds(
    Job,
    nodes=st.integers(1, 3),
    per_node=st.integers(1, 4),
    steps=st.integers(8, 60),
    step_s=st.sampled_from([0.5, 1.0, 2.5, 8.0]),
    age_s=st.sampled_from([0.0, 0.3, 1.0]),
    world_stated=st.booleans(),
)


def _healthy(job: Job, compute: bool) -> Job:
    if compute:  # the dump caught every rank in its own step, none in a collective
        for rank in job.ranks.values():
            rank.frames = outside("forward", "model.py", 211)
    return job


def _watchdog(rank: int) -> str:
    return (
        f"[rank{rank}]:[E1201 08:59:59.000000000 ProcessGroupNCCL.cpp:632] [Rank {rank}] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, "
        "NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600050 milliseconds before "
        "timing out.\n"
    )


def _add_gone(job: Job, rank: int) -> None:
    job.ranks[rank].alive = False


def _add_timeout(job: Job, rank: int) -> None:
    job.ranks[rank].log += _watchdog(rank)


def _add_split(job: Job, rank: int) -> None:
    for other in job.ranks.values():
        other.frames = in_collective()
    job.ranks[rank].frames = in_collective("broadcast", 2611)


def _add_call_site(job: Job, rank: int) -> None:
    for other in job.ranks.values():
        other.frames = in_collective()
    job.ranks[rank].frames = in_collective(caller=99)


def _add_stopped(job: Job, rank: int) -> None:
    job.ranks[rank].state = "T"


def _add_launcher_exit(job: Job, rank: int) -> None:
    # The lab's own launcher line (issue 17: once filed under "could not be read").
    pid = job.ranks[rank].pid
    job.ranks[rank].alive = False
    job.extra_logs.setdefault(job.node_of(rank), []).append(
        f"launcher: rank {rank} (pid {pid}) exited with exitcode 137 (signal 9)"
    )


def _add_desync(job: Job, rank: int) -> None:
    reporter = (rank + 1) % job.world
    job.ranks[reporter].log += (
        f"[rank{reporter}]:[E1201 08:59:59.100000000 ProcessGroupNCCL.cpp:1395] [PG 0 Rank "
        f"{reporter}] Desync debugging report: [{rank}] finished collective #76, but didn't "
        "join collective #77 (count from 1)\n"
    )


STUCK = {
    "a rank gone": _add_gone,
    "a watchdog timeout": _add_timeout,
    "ranks split across collectives": _add_split,
    "ranks split across call sites": _add_call_site,
    "a process stopped": _add_stopped,
    "a launcher exit": _add_launcher_exit,
    "a desync report": _add_desync,
}


@PROPERTY
@given(jobs, st.booleans(), st.sampled_from(sorted(STUCK)), st.data())
def test_any_stuck_signal_makes_a_healthy_job_not_healthy(job, compute, signal, data):
    job = _healthy(job, compute)
    before = diagnose(copy.deepcopy(job).evidence()).to_json()
    assume(before["classification"] == "healthy")
    if signal.startswith("ranks split"):
        assume(job.world >= 2)
    if signal == "a desync report":
        assume(job.world >= 2)
    rank = data.draw(st.integers(0, job.world - 1), label="rank")
    STUCK[signal](job, rank)
    after = diagnose(job.evidence()).to_json()
    assert after["classification"] not in ("healthy", "straggler"), (signal, after["summary"])


def test_the_healthy_jobs_generated_are_healthy_to_begin_with():
    # The property above assumes a healthy start; it must not be vacuous.
    assert diagnose(Job().evidence()).to_json()["classification"] == "healthy"
    assert (
        diagnose(_healthy(Job(nodes=3, per_node=1), True).evidence()).to_json()["classification"]
        == "healthy"
    )


# ------------------------------------------------------------------ "unknown" is a claim

_LINES = [
    "[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered",
    "[rank{r}]:[E1201 08:59:59.000000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=5, OpType=BROADCAST, NumelIn=8, NumelOut=8, "
    "Timeout(ms)=600000) ran for 600001 milliseconds before timing out.",
    "[default{r}]:[titan] 2026-12-01 08:40:00,000 - root - INFO - step: 120  loss:  4.72",
    "srun: error: {node}: task {r}: Killed",
    "{node}:4242:4250 [0] NCCL INFO comm 0x5599 rank {r} nranks 8 cudaDev 0 busId 1000 - Init "
    "COMPLETE",
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
]
_DMESG = [
    "[Mon Dec  1 08:50:00 2026] NVRM: Xid (PCI:0000:41:00): 79, pid='<unknown>', "
    "name=<unknown>, GPU has fallen off the bus.",
    "[Mon Dec  1 08:50:00 2026] Out of memory: Killed process 9191 (python) total-vm:1kB, "
    "anon-rss:1kB, file-rss:0kB, shmem-rss:0kB",
]


@st.composite
def named_bundles(draw) -> SnapshotEvidence:
    """Logs-only bundles whose lines each name a rank, or kernel lines of a node."""
    node_count = draw(st.integers(1, 3))
    nodes = [
        NodeEvidence(node=f"n{i}", hostname=f"n{i}", collected_at=T0) for i in range(node_count)
    ]
    pieces = draw(
        st.lists(
            st.tuples(st.integers(0, node_count - 1), st.integers(0, 7), st.sampled_from(_LINES)),
            min_size=1,
            max_size=6,
        )
    )
    for node, rank, line in pieces:
        text = line.format(r=rank, node=nodes[node].node) + "\n"
        nodes[node].logs[f"/logs/train-{rank}.log"] = (
            nodes[node].logs.get(f"/logs/train-{rank}.log", "") + text
        )
    for node, line in draw(
        st.lists(st.tuples(st.integers(0, node_count - 1), st.sampled_from(_DMESG)), max_size=2)
    ):
        nodes[node].dmesg = (nodes[node].dmesg or "") + line + "\n"
    world = draw(st.sampled_from([None, 8]))
    return SnapshotEvidence(nodes=nodes, expected_world_size=world, collected_at=T0)


@PROPERTY
@given(named_bundles())
def test_no_bundle_whose_evidence_names_a_rank_or_node_gets_unknown(evidence):
    result = diagnose(evidence).to_json()
    assert result["classification"] != "unknown", result["summary"]
    assert result["check"], "a class without evidence enough needs the check that would confirm it"


def test_a_bundle_that_names_nothing_is_unknown():
    empty = SnapshotEvidence(
        nodes=[NodeEvidence(node="n0", dmesg="[    0.000000] Linux version 6.1.0\n")],
        collected_at=T0,
    )
    assert diagnose(empty).to_json()["classification"] == "unknown"


# ------------------------------------------------------------------ node order and host names

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())
_IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")


def _renamed(evidence: SnapshotEvidence, order: list[int], names: dict[str, str]):
    def swap(text):
        for old, new in names.items():
            text = re.sub(rf"(?<![\w.-]){re.escape(old)}(?![\w-])", new, text)
        return text

    nodes = []
    for index in order:
        node = copy.deepcopy(evidence.nodes[index])
        node.node = names.get(node.node, node.node)
        node.hostname = names.get(node.hostname, node.hostname)
        node.logs = {path: swap(text) for path, text in node.logs.items()}
        node.dmesg = swap(node.dmesg) if node.dmesg else node.dmesg
        nodes.append(node)
    return SnapshotEvidence(
        nodes=nodes,
        expected_world_size=evidence.expected_world_size,
        collected_at=evidence.collected_at,
        cluster=evidence.cluster,
    )


def _verdict_of(evidence: SnapshotEvidence, names: dict[str, str]) -> dict:
    result = diagnose(evidence).to_json()
    back = {new: old for old, new in names.items()}
    return {
        "classification": result["classification"],
        "suspect_ranks": result["suspect_ranks"],
        "missing_ranks": result["missing_ranks"],
        "unobserved_ranks": result["unobserved_ranks"],
        "suspect_nodes": sorted(back.get(n, n) for n in result["suspect_nodes"]),
    }


@pytest.fixture(scope="module")
def bundles():
    from collectors.bundles import read_bundle

    return {case.name: read_bundle(case) for case in CASES}


@PROPERTY
@given(st.sampled_from([c.name for c in CASES]), st.randoms(use_true_random=False))
def test_shuffling_node_order_or_renaming_hosts_changes_no_verdict(bundles, name, rnd):
    evidence = bundles[name]
    order = list(range(len(evidence.nodes)))
    rnd.shuffle(order)
    hosts = {n.node for n in evidence.nodes} | {n.hostname for n in evidence.nodes if n.hostname}
    names = {
        h: f"host-{rnd.randrange(10**6):06d}-{i}"
        for i, h in enumerate(sorted(hosts))
        if h and not _IP.match(h)
    }
    before = _verdict_of(evidence, {})
    after = _verdict_of(_renamed(evidence, order, names), names)
    assert after == before, (name, order, names)
