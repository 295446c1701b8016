"""Hung commands, huge files, hostile output: every collection ends on time and bounded."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from analysis.evidence import GATHERED, stopped_short
from collectors.visits import ssh_visit

from .conftest import pyspy_call_starts, wait_for


def _hanging_pyspy(directory: Path) -> Path:
    # Sleeps in a child process, like a py-spy stuck on a process in D state; each call writes
    # when it started, so a test can tell calls side by side from calls one after another.
    script = directory / "hanging-py-spy"
    script.write_text(f'#!/bin/sh\necho "$(date +%s.%N) $*" >> {directory}/starts\nsleep 3600\n')
    script.chmod(0o755)
    return script


def _processes_running(path: Path) -> list[int]:
    """Pids whose command line mentions `path` (scanning /proc, no pattern killing)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if str(path).encode() in cmdline:
            found.append(int(entry))
    return found


def test_it_bounds_a_hanging_py_spy_per_command(sshd, ranks, tmp_path):
    hanging = _hanging_pyspy(tmp_path)
    evidence = ssh_visit(
        sshd.target(), ranks.plan(pyspy_command=str(hanging), command_timeout_s=2)
    ).evidence
    assert evidence.status == GATHERED, evidence.status
    # Five hung py-spy calls bounded together, not one by one: each started before the one
    # before it could have been stopped (2 s), whatever the machine's load made the wall.
    starts = [stamp for stamp, _ in pyspy_call_starts(tmp_path)]
    assert len(starts) == len(ranks.pids) + 1, starts
    assert max(starts) - min(starts) < 2, starts
    for pid in [*ranks.pids, ranks.not_python_pid]:
        assert evidence.pyspy_errors[pid] == "py-spy dump --json timed out after 2s"
    assert set(evidence.environ) >= set(ranks.pids)
    assert evidence.logs


def test_it_keeps_partial_evidence_when_the_node_time_budget_runs_out(sshd, ranks, tmp_path):
    hanging = _hanging_pyspy(tmp_path)
    started = time.monotonic()
    # 15 s in all: the probe's share on the node (what is left after connecting, a margin and
    # shipping; 10 s when connecting is quick) is for every step beside the hung py-spy to
    # finish on a loaded machine; the py-spy (60 s of its own) runs it out whatever the load.
    visit = ssh_visit(
        sshd.target(),
        ranks.plan(pyspy_command=str(hanging), command_timeout_s=60, total_timeout_s=15),
    )
    evidence = visit.evidence
    elapsed = time.monotonic() - started
    assert elapsed < 16, elapsed
    assert re.fullmatch(r"the probe used up its \d+s on the node", evidence.status.note), (
        evidence.status
    )
    assert evidence.status.gathered
    assert visit.failure is None  # partial evidence is evidence: not a failure
    # What was finished before the stop is kept, including steps that ran beside py-spy...
    assert set(evidence.environ) >= set(ranks.pids)
    assert evidence.logs and evidence.dmesg and evidence.shell_init is not None
    assert "/dev/shm" in evidence.system["df -h /dev/shm"]
    # ...and the processes py-spy never reported on say so.
    for pid in ranks.pids:
        assert "not collected" in evidence.pyspy_errors[pid]
    # The probe stopped its hung commands instead of leaving them behind.
    wait_for(lambda: not _processes_running(hanging), timeout=5, what="hung py-spy to be stopped")


def test_it_keeps_the_end_of_a_huge_log_and_marks_it_truncated(sshd, ranks, tmp_path):
    log = tmp_path / "huge.log"
    with open(log, "wb") as out:
        for step in range(40_000):
            out.write(b"2026-11-29 09:30:01,123 INFO [rank0] host=h step=%d loss=1.0\n" % step)
    evidence = ssh_visit(
        sshd.target(), ranks.plan(log_globs=[str(tmp_path / "*.log")], tail_bytes=64 * 1024)
    ).evidence
    assert evidence.status == GATHERED
    tail = evidence.logs[str(log)]
    assert len(tail) == 64 * 1024
    assert tail.endswith("step=39999 loss=1.0\n")
    assert evidence.truncated == [f"logs:{log}"]


def test_it_caps_flight_recorder_dumps_and_environments(sshd, ranks, tmp_path):
    dump = tmp_path / "trace_rank_9"
    dump.write_bytes(os.urandom(300_000))
    evidence = ssh_visit(
        sshd.target(),
        ranks.plan(flight_recorder_globs=[str(tmp_path / "trace_rank_*")], artifact_cap_bytes=100),
    ).evidence
    assert evidence.flight_recorder[str(dump)] == dump.read_bytes()[:100]
    assert f"flight_recorder:{dump}" in evidence.truncated
    for pid in ranks.pids:  # each rank's environment is well over 100 bytes
        assert len(evidence.environ[pid]) == 100
    assert {f"environ:{pid}" for pid in ranks.pids} <= set(evidence.truncated)


def test_it_stops_reading_a_node_that_sends_too_much(sshd, ranks, tmp_path):
    for index in range(4):
        (tmp_path / f"big{index}.log").write_bytes(os.urandom(200_000))
    evidence = ssh_visit(
        sshd.target(),
        ranks.plan(log_globs=[str(tmp_path / "*.log")], max_total_bytes=300_000),
    ).evidence
    assert evidence.status == stopped_short("output cut at 300000 bytes")
    assert "output" in evidence.truncated
    assert 1 <= len(evidence.logs) < 4


def test_it_skips_fifos_and_other_non_files_matched_by_a_glob(sshd, ranks, tmp_path):
    fifo = tmp_path / "stuck.log"
    os.mkfifo(fifo)  # reading it would block forever
    (tmp_path / "real.log").write_text("fine\n")
    started = time.monotonic()
    plan = ranks.plan(log_globs=[str(tmp_path / "*.log")], command_timeout_s=20)
    evidence = ssh_visit(sshd.target(), plan).evidence
    # Reading the fifo would have blocked its tail until the command's timeout.
    assert time.monotonic() - started < plan.command_timeout_s
    assert evidence.status == GATHERED
    assert evidence.logs == {str(tmp_path / "real.log"): "fine\n"}
