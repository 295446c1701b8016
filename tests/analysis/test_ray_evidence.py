"""Ray's evidence in the diagnosis, offline: a Ray Train worker's stack is its training
thread's, its rank comes from Ray Train's worker group (its environment has none), and Ray's
word on a dead worker is a rank that left. Built on what the lab's Ray 2.60 gave
(tests/analysis/samples/ray/)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import analysis
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.schedulers import ray
from analysis.schedulers.attach import scheduler_ranks, scheduler_world_size
from analysis.signals.kinds import classify

SAMPLES = Path(__file__).parent / "samples" / "ray"
WORKER_DUMP = (SAMPLES / "pyspy-worker.txt").read_text()
# A worker's environment as /proc/PID/environ has it: Ray's variables, no RANK.
WORKER_ENVIRON = b"RAY_JOB_ID=02000000\0RAY_RAYLET_PID=19\0GLOO_SOCKET_IFNAME=lo\0HOME=/root\0"
NOW = datetime(2026, 12, 1, 22, 4, tzinfo=UTC)


def test_a_ray_worker_s_stack_is_its_training_thread_not_ray_s_task_loop():
    threads, problems = parse_pyspy(WORKER_DUMP)
    assert problems == []
    thread = main_thread(threads)
    assert thread.name.startswith("TrainingThread") and thread.frames[0].name == "all_reduce"


def test_a_main_thread_that_trains_is_still_the_one_read():
    dump = WORKER_DUMP.replace("Worker.main_loop (ray/_private/worker.py:1069)", "train (t.py:9)")
    assert main_thread(parse_pyspy(dump)[0]).name == "MainThread"
    alone = "\n".join(WORKER_DUMP.splitlines()[:6])  # Ray's loop and nothing else
    assert main_thread(parse_pyspy(alone)[0]).name == "MainThread"


def test_ray_s_list_of_possible_causes_is_not_read_as_the_cause():
    death = ray.read_job(_frames(), "hdlab-job").workers[3].death
    kinds = {kind for kind, _, _ in classify(death)}
    assert "exit" in kinds and not kinds & {"oom", "segfault", "killed"}


def test_scheduler_ranks_are_read_within_bounds():
    scheduler = {"ranks": {"n": {"12": [3, 1], "x": [1], "13": ["2"], "14": [-1], "15": [2, -1]}}}
    assert scheduler_ranks(scheduler, "n") == {12: (3, 1), 15: (2, None)}
    assert scheduler_ranks(scheduler, "other", "n") == {12: (3, 1), 15: (2, None)}
    assert scheduler_ranks({"ranks": []}, "n") == scheduler_ranks(None, "n") == {}
    workers = [{"rank": r} for r in (1, 0, 3, 2)]
    assert scheduler_world_size({"kind": "ray", "workers": workers}) == 4
    assert scheduler_world_size({"kind": "ray", "workers": workers[:3]}) is None  # a gap
    assert scheduler_world_size({"kind": "slurm", "workers": workers}) is None


def _frames() -> dict[str, str]:
    return {p.name: p.read_text() for p in (SAMPLES / "rank-exit").iterdir()}


def _node(name: str, pids: list[int]) -> NodeEvidence:
    header = "    PID    PPID STAT ELAPSED COMMAND\n"
    rows = "".join(f"{pid:>7} {19:>7} Sl {120:>7} ray::RayTrainWorker\n" for pid in pids)
    return NodeEvidence(
        node=name,
        hostname=f"host-{name}",
        ps=header + rows,
        environ={pid: WORKER_ENVIRON for pid in pids},
        pyspy={pid: WORKER_DUMP.replace("Process 115", f"Process {pid}") for pid in pids},
        collected_at=NOW,
    )


def test_a_dead_ray_worker_is_the_rank_that_left_and_ray_s_words_are_quoted():
    read = ray.read_job(_frames(), "hdlab-job")
    scheduler = {
        "kind": "ray",
        "job": read.summary(),
        "workers": [{"rank": w.rank, "pid": w.pid, "node": w.node} for w in read.workers],
        "lines": ray.evidence_lines(read),
        "ranks": ray.rank_map(read),
    }
    # What the probe's pid mode gave: the alive workers only (pid 114, rank 3, is gone).
    evidence = SnapshotEvidence(
        nodes=[_node("127.171.1.1", [713, 759]), _node("127.171.1.2", [115])],
        collected_at=NOW,
        scheduler=scheduler,
    )
    diagnosis = analysis.diagnose(evidence)
    assert diagnosis.classification == "A", diagnosis.summary
    assert diagnosis.suspect_ranks == (3,)
    assert diagnosis.world_size == 4
    rows = {row.rank: row for row in diagnosis.per_rank}
    assert [rows[r].pid for r in range(3)] == [713, 759, 115]
    assert all(rows[r].frame.startswith("all_reduce") for r in range(3))
    quoted = "\n".join(str(e) for e in diagnosis.evidence)
    assert "ray: Ray Train worker world_rank=3 pid=114" in quoted
    assert "The actor is dead because its worker process has died" in quoted
