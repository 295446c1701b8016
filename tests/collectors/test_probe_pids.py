"""The probe's pid mode (a scheduler names the processes: Ray's worker actors): exactly the
pids given, whatever their command line, never the pattern's; run here on its own (no SSH)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hangdesk.frames import parse_probe_output, render_probe
from hangdesk.plan import CollectionPlan


def _probe(plan: CollectionPlan) -> dict[int, str]:
    result = subprocess.run(
        ["sh", "-s"], input=render_probe(plan), capture_output=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )  # fmt: skip
    evidence = parse_probe_output("n", result.stdout)
    rows = (evidence.ps or "").splitlines()[1:]
    assert set(evidence.environ) == {int(r.split()[0]) for r in rows}
    return {int(r.split()[0]): r for r in rows}


@pytest.fixture
def processes():
    """A worker whose command line names no trainer (as Ray's `ray::RayTrainWorker`), and a
    process the pattern matches that is no worker of the job."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ray-worker"])
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "train.py"])
    yield worker.pid, trainer.pid
    for proc in (worker, trainer):
        proc.kill()
        proc.wait()


def _plan(**changes) -> CollectionPlan:
    quiet = {"log_globs": [], "flight_recorder_globs": [], "sample_seconds": 0}
    return CollectionPlan(
        process_pattern=r"train[.]py", pyspy_command="/bin/false", **{**quiet, **changes}
    )


def test_it_snapshots_exactly_the_pids_given_not_the_pattern_s(processes):
    worker, trainer = processes
    assert set(_probe(_plan())) >= {trainer} and worker not in _probe(_plan())
    listed = _probe(_plan(pids=[worker, 2**31 - 2]))  # the second is no process: not listed
    assert list(listed) == [worker] and "ray-worker" in listed[worker]


def test_an_empty_pid_list_is_no_process_at_all(processes):
    assert _probe(_plan(pids=[])) == {}


@pytest.mark.parametrize("pids", [[0], [-5], [2**31], list(range(1, 1026))])
def test_pids_that_cannot_be_are_an_invalid_plan(pids):
    with pytest.raises(ValueError, match="pid"):
        _plan(pids=pids).validate()
