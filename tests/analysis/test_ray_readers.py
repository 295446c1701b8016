"""Ray's answer about a job, read from its CLI's real output: the frames collectors/ray.sh got
from the lab's Ray 2.60 head (tests/analysis/samples/ray/: a running Ray Train job whose rank
3 was SIGKILLed, the same job after its second node died, a finished job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.schedulers import ray

SAMPLES = Path(__file__).parent / "samples" / "ray"


def frames(case: str, **changes: str) -> dict[str, str]:
    found = {p.name: p.read_text() for p in (SAMPLES / case).iterdir()}
    return {**found, **changes}


@pytest.mark.parametrize(
    "job", ["raysubmit_XsD1WcLHnpZRpbbK", "02000000", "hdlab-job", "run=3.1:a+b", "x" * 64]
)
def test_it_takes_submission_ids_job_ids_and_run_names(job):
    assert ray.valid_job_id(f" {job} ") == job


@pytest.mark.parametrize(
    "job", ["", "x; ray stop", "$(id)", "a b", "-rf", "x" * 65, "nightly\n7", "`reboot`"]
)
def test_it_refuses_anything_else_before_any_shell_sees_it(job):
    with pytest.raises(ray.RayError, match="is not a Ray job"):
        ray.valid_job_id(job)


@pytest.mark.parametrize("asked", ["hdlab-job", "02000000"])
def test_a_running_job_is_found_by_submission_id_job_id_or_run_name(asked):
    read = ray.read_job(frames("rank-exit"), asked)
    assert (read.job.submission_id, read.job.job_id, read.job.status) == (
        "hdlab-job",
        "02000000",
        "RUNNING",
    )
    assert read.job.run_name == "hdlab-job"  # from Ray Train's controller log
    ray.refuse_unless_running(read)


def test_each_worker_has_its_rank_node_and_pid_and_the_dead_one_ray_s_words():
    read = ray.read_job(frames("rank-exit"), "hdlab-job")
    assert [(w.rank, w.node, w.pid, w.state) for w in read.workers] == [
        (0, "127.171.1.1", 713, "ALIVE"),
        (1, "127.171.1.1", 759, "ALIVE"),
        (2, "127.171.1.2", 115, "ALIVE"),
        (3, "127.171.1.2", 114, "DEAD"),
    ]
    dead = read.workers[3]
    assert dead.reason == "WORKER_DIED"
    assert dead.death.startswith("The actor is dead because its worker process has died.")
    assert ray.rank_map(read) == {
        "127.171.1.1": {"713": [0, 0], "759": [1, 1]},
        "127.171.1.2": {"115": [2, 0], "114": [3, 1]},
    }
    [line] = ray.evidence_lines(read)["127.171.1.2"]
    assert line.startswith(
        "ray: Ray Train worker world_rank=3 pid=114 (actor 9bd6da73ce98ac02) on 127.171.1.2 is "
        "DEAD: The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR"
    )


def test_the_workers_session_logs_are_named_by_job_and_pid_on_their_node():
    logs = ray.worker_logs(ray.read_job(frames("rank-exit"), "hdlab-job"))
    base = "/tmp/ray/session_2026-12-01_22-01-42_871168_5/logs"
    assert logs["127.171.1.2"] == [
        f"{base}/raylet.out",
        f"{base}/worker-*-02000000-115.out",
        f"{base}/worker-*-02000000-115.err",
        f"{base}/worker-*-02000000-114.out",
        f"{base}/worker-*-02000000-114.err",
    ]
    # A log directory that is not a plain absolute path gives no globs at all.
    odd = ray.read_job(frames("rank-exit", logdir="logs/*"), "hdlab-job")
    assert ray.worker_logs(odd) == {}


def test_a_dead_node_and_its_actors_are_said_on_that_node_and_the_group_reschedules():
    read = ray.read_job(frames("node-dead"), "hdlab-job")
    lines = ray.evidence_lines(read)["127.171.1.2"]
    assert any(
        "world_rank=2 pid=115" in line and "The actor died because its node has died" in line
        for line in lines
    )
    assert lines[-1] == (
        "ray: node 127.171.1.2 (127.171.1.2) is DEAD: Unexpected termination: health check "
        "failed due to missing too many heartbeats"
    )
    summary = read.summary()
    assert (summary["alive"], summary["dead"]) == (2, 2)
    assert summary["placement_groups"] == ["73f427577e12 RESCHEDULING"]
    assert read.placement_groups[0]["unplaced"] == 2


def test_a_finished_job_is_refused_saying_it_ended():
    read = ray.read_job(frames("finished"), "hdlab-done")
    with pytest.raises(ray.RayError, match=r"hdlab-done is SUCCEEDED \(Job finished .*ended"):
        ray.refuse_unless_running(read)


def test_an_unknown_job_is_refused():
    with pytest.raises(ray.RayError, match="Ray knows no job nightly-7"):
        ray.read_job(frames("rank-exit"), "nightly-7")


def test_a_pending_job_is_refused_as_having_no_workers_yet():
    jobs = json.loads(frames("rank-exit")["jobs"])
    jobs[0].update(status="PENDING", job_id=None)
    read = ray.job_asked(frames("rank-exit", jobs=json.dumps(jobs)), "hdlab-job")
    with pytest.raises(ray.RayError, match="is PENDING: it has no workers to snapshot yet"):
        ray.refuse_unless_active(read)


def test_a_running_job_without_ray_train_workers_is_refused():
    read = ray.read_job(frames("rank-exit", workers="[]"), "hdlab-job")
    with pytest.raises(ray.RayError, match="lists no Ray Train worker of it"):
        ray.refuse_unless_running(read)


def test_a_head_that_cannot_list_jobs_says_so():
    with pytest.raises(ray.RayError, match=r"ray list jobs failed on the head: .*Failed to"):
        ray.job_asked(
            {"jobs": "", "jobs.rc": "1", "jobs.err": "ConnectionError: Failed to connect"}, "x"
        )


def test_workers_of_an_earlier_attempt_are_left_out_once_a_group_is_known():
    workers = json.loads(frames("rank-exit")["workers"])
    old = {**workers[3], "actor_id": "0ld" * 10, "pid": 99, "state": "DEAD"}
    read = ray.read_job(frames("rank-exit", workers=json.dumps([*workers, old])), "hdlab-job")
    assert 99 not in [w.pid for w in read.workers]


def test_without_a_worker_group_line_the_workers_are_kept_without_ranks():
    read = ray.read_job(frames("rank-exit", train=""), "02000000")
    assert len(read.workers) == 4 and {w.rank for w in read.workers} == {None}
    assert ray.rank_map(read) == {}
    assert "pid=114 (actor" in ray.evidence_lines(read)["127.171.1.2"][0]


@pytest.mark.parametrize(
    "text", ["", "garbage", "{}", '{"a": 1}', "[1, 2]", "[" * 100_000, '[{"pid": "x"}]']
)
def test_garbage_from_the_head_reads_as_nothing(text):
    read = ray.read_job(frames("rank-exit", workers=text, nodes=text), "hdlab-job")
    assert all(w.address == "" for w in read.workers)


def test_train_records_need_a_run_and_a_job_and_the_last_group_wins():
    group = "Started training worker group of size 1: \n- (ip=10.0.0.3, pid={}) world_rank=0, "
    group += "local_rank=0, node_rank=0"
    records = [
        {"message": "x", "run_name": "r", "job_id": "03000000"},
        {"message": group.format(7), "run_name": "r", "job_id": "03000000"},
        {"message": group.format(8), "run_name": "r", "job_id": "03000000"},
        {"message": group.format(9), "job_id": "03000000"},  # no run name: not a run's record
    ]
    text = "\n".join(json.dumps(r) for r in records) + "\n{not json\n"
    [run] = ray.train_runs(text)
    assert (run.name, run.job_id, run.group) == ("r", "03000000", {("10.0.0.3", 8): (0, 0, 0)})


def test_ray_status_recent_failures_are_read():
    status = frames("node-dead")["status"]
    assert ray.status_failures(status) == []
    failed = status.replace(" (no failures)", " node_e1bc35e8: NodeTerminated (ip: 10.0.0.3)")
    assert ray.status_failures(failed) == ["node_e1bc35e8: NodeTerminated (ip: 10.0.0.3)"]
