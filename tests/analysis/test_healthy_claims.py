""" "healthy" is a claim: proof of motion, and nothing that says stuck (issue 17).

Before, the first rule that spoke won and `moving` spoke second: one warm-up step followed by
silence counted as progress, and a 5 s floor outweighed fifteen median step times while the
flight recorder showed a group in which one rank never issued the collective.
"""

from __future__ import annotations

import copy
from datetime import timedelta

from analysis import diagnose
from tests.analysis.sample_evidence import load_snapshot
from tests.analysis.test_rules import T0, logs_only, step_lines


def _verdict(evidence, previous=None) -> dict:
    return diagnose(evidence, previous=previous).to_json()


def test_one_warm_up_step_then_silence_is_no_proof_of_progress():
    # Step 1 took 30 s (compilation); a minute later nothing else came. 5 x 30 s would have
    # called that moving.
    texts = {r: step_lines(r, 1, step_s=30.0) for r in range(4)}
    result = _verdict(logs_only(texts, 4, T0 + timedelta(seconds=90)))
    assert result["progress"]["progressing"] is None
    assert "warm-up" in result["progress"]["note"]
    assert result["classification"] != "healthy"


def test_steps_past_the_warm_up_are_proof():
    texts = {r: step_lines(r, 8, step_s=30.0) for r in range(4)}
    result = _verdict(logs_only(texts, 4, T0 + timedelta(seconds=8 * 30 + 20)))
    assert result["progress"]["progressing"] is True
    assert result["classification"] == "healthy"


def test_fifteen_step_times_of_silence_are_no_proof_however_short():
    # 0.2 s steps, the last one 3 s ago: under the 5 s floor that allows for late logs, but
    # fifteen step times. Neither proof of motion nor of a stop.
    texts = {r: step_lines(r, 20, step_s=0.2) for r in range(4)}
    result = _verdict(logs_only(texts, 4, T0 + timedelta(seconds=20 * 0.2 + 3)))
    assert result["progress"]["progressing"] is None
    assert result["classification"] != "healthy"


def test_a_job_that_logs_every_tenth_step_is_judged_by_its_log_period():
    # DeepSpeed-style: one line every 10 steps of 1 s. 8 s since the last line is normal.
    lines = {}
    for rank in range(4):
        text = step_lines(rank, 200, step_s=1.0)
        lines[rank] = "".join(
            ln + "\n" for ln in text.splitlines() if ln.endswith("0 step_time=1.0s")
        )
    result = _verdict(logs_only(lines, 4, T0 + timedelta(seconds=200 + 8)))
    assert result["progress"]["progressing"] is True, result["progress"]
    assert result["progress"]["step_time_s"] == 10.0


def _hung_at_the_floor():
    """The captured hang (rank 3 never issued collective #6 of the world group; the others
    wait in it), looked at 3 s after the last step: fifteen of its 0.2 s steps."""
    snapshot = copy.deepcopy(load_snapshot("outside"))
    last = max(
        line.split(" INFO")[0]
        for text in snapshot.nodes[0].logs.values()
        for line in text.splitlines()
        if " step=" in line
    )
    from analysis.parsers.logs import parse_timestamp

    at = parse_timestamp(last) + timedelta(seconds=3)
    snapshot.collected_at = at
    snapshot.nodes[0].collected_at = at
    return snapshot


def test_the_flight_recorders_never_issued_collective_outweighs_a_fresh_step():
    result = _verdict(_hung_at_the_floor())
    assert result["classification"] == "A"
    assert result["suspect_ranks"] == [3]


def test_the_flight_recorder_in_flight_is_no_stuck_signal():
    # The healthy capture's dumps: rank 0 had not yet issued the newest collective when the
    # dumps were written, a moment before the snapshot. Every moving job looks like that.
    result = _verdict(load_snapshot("healthy", "snap1"))
    assert result["flight_recorder"]["first_mismatch"] is not None
    assert result["classification"] == "healthy"


def test_a_kernel_kill_from_before_the_job_is_no_stuck_signal():
    # A node's dmesg keeps an earlier job's OOM kill (the lab's nodes share this machine's
    # kernel log): stamped before this job's ranks started, it says nothing of tonight.
    from tests.analysis.synthetic import Job

    job = Job()
    job.dmesg[0] = (
        "[Mon Nov 30 20:10:31 2026] Memory cgroup out of memory: Killed process 4905 (python) "
        "total-vm:1482596kB, anon-rss:717244kB, file-rss:128520kB, shmem-rss:0kB\n"
    )
    assert _verdict(job.evidence())["classification"] == "healthy"
    job.dmesg[0] = job.dmesg[0].replace("Mon Nov 30 20:10:31", "Tue Dec  1 08:59:00")
    job.dmesg[0] = job.dmesg[0].replace("process 4905", f"process {job.ranks[0].pid}")
    job.ranks[0].alive = False
    assert _verdict(job.evidence())["classification"] != "healthy"  # a rank's, during the job


def test_a_kernel_kill_of_a_process_that_is_no_rank_is_no_stuck_signal():
    # During the job, the OOM killer took a process that is none of the node's ranks (every
    # rank alive, each pid known from environ): another job's, on a shared machine.
    from tests.analysis.synthetic import Job

    job = Job()
    job.dmesg[0] = (
        "[Tue Dec  1 08:59:00 2026] Memory cgroup out of memory: Killed process 32499 (python) "
        "total-vm:1482648kB, anon-rss:715796kB, file-rss:92168kB, shmem-rss:0kB\n"
    )
    assert _verdict(job.evidence())["classification"] == "healthy"
