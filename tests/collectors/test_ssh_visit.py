"""A healthy node: everything the probe gathers, through a real sshd, against real ranks."""

from __future__ import annotations

import json
import time

import pytest

from analysis.evidence import GATHERED
from collectors.visits import run_script, ssh_visit

from .conftest import FLIGHT_RECORDER_DUMP, NON_UTF8_LOG, WORLD_SIZE, pyspy_call_starts


@pytest.fixture(scope="module")
def collected(sshd, ranks):
    started = time.monotonic()
    visit = ssh_visit(sshd.target(), ranks.plan())
    assert visit.failure is None, visit.failure
    return visit.evidence, time.monotonic() - started


def _env(raw: bytes) -> dict[bytes, bytes]:
    return dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)


def test_it_reports_ok_with_hostname_and_time(collected):
    evidence, _ = collected
    assert evidence.status == GATHERED, evidence.status
    assert evidence.hostname
    assert evidence.collected_at is not None


def test_it_lists_only_the_training_processes(collected, ranks):
    evidence, _ = collected
    lines = evidence.ps.splitlines()
    assert lines[0].split()[:4] == ["PID", "PPID", "STAT", "ELAPSED"]
    listed = sorted(int(line.split()[0]) for line in lines[1:])
    assert listed == sorted([*ranks.pids, ranks.not_python_pid])


def test_it_collects_the_environment_of_each_training_process(collected, ranks):
    evidence, _ = collected
    for rank, pid in enumerate(ranks.pids):
        env = _env(evidence.environ[pid])
        assert env[b"RANK"] == str(rank).encode()
        assert env[b"WORLD_SIZE"] == str(WORLD_SIZE).encode()
        assert env[b"NCCL_SOCKET_IFNAME"] == b"lo"
        assert env[b"HD_RAW_BYTES"] == b"\xff\xfe\x80raw"  # non-UTF-8 survives byte for byte


def test_it_collects_the_python_stack_of_each_training_process(collected, ranks):
    evidence, _ = collected
    for pid in ranks.pids:
        threads = json.loads(evidence.pyspy[pid])
        frames = [frame["name"] for thread in threads for frame in thread["frames"]]
        assert "fake_all_gather" in frames
        assert pid not in evidence.pyspy_errors


def test_it_records_why_py_spy_failed_on_one_process_and_keeps_the_others(collected, ranks):
    evidence, _ = collected
    assert ranks.not_python_pid not in evidence.pyspy
    error = evidence.pyspy_errors[ranks.not_python_pid]
    assert "py-spy dump --json exited" in error
    assert "text dump exited" in error  # the text fallback was tried too
    assert set(ranks.pids) <= set(evidence.pyspy)


def test_it_collects_log_tails_by_glob(collected, ranks):
    evidence, _ = collected
    for rank in range(WORLD_SIZE):
        log = evidence.logs[str(ranks.log_dir / f"rank{rank}.log")]
        assert f"[rank{rank}] host=" in log
        assert "step=3" in log
    # Bytes that are not UTF-8 stay visible instead of breaking the text.
    launcher = evidence.logs[str(ranks.log_dir / "launcher.log")]
    assert launcher == NON_UTF8_LOG.decode("utf-8", "backslashreplace")
    assert "\\xff\\xfe" in launcher


def test_it_collects_flight_recorder_dumps_as_bytes(collected, ranks):
    evidence, _ = collected
    assert evidence.flight_recorder == {str(ranks.fr_dir / "trace_rank_0"): FLIGHT_RECORDER_DUMP}


def test_it_collects_kernel_log_and_system_facts(collected):
    evidence, _ = collected
    assert evidence.dmesg
    assert evidence.system["dmesg source"] in ("dmesg -T", "dmesg", "journalctl -k")
    assert "/dev/shm" in evidence.system["df -h /dev/shm"]
    assert len(evidence.system["loadavg"].split()) == 5
    assert evidence.shell_init is not None
    assert evidence.truncated == []


def test_it_notes_when_nvidia_smi_is_absent(collected):
    evidence, _ = collected
    # No GPU on this machine: the absence is a recorded fact, not an error.
    assert evidence.nvidia_smi is None
    assert evidence.system["nvidia-smi"] == "not installed"


def test_it_runs_py_spy_for_all_processes_side_by_side(sshd, ranks, tmp_path):
    # Each py-spy call takes >= 1 s: one after another, five processes would take >= 5 s.
    slow_pyspy = tmp_path / "slow-py-spy"
    slow_pyspy.write_text(
        f'#!/bin/sh\necho "$(date +%s.%N) $*" >> {tmp_path}/starts\nsleep 1\n'
        f'exec {ranks.plan().pyspy_command} "$@"\n'
    )
    slow_pyspy.chmod(0o755)
    plan = ranks.plan(pyspy_command=str(slow_pyspy), sample_seconds=0)
    evidence = ssh_visit(sshd.target(), plan).evidence
    assert evidence.status == GATHERED
    assert set(ranks.pids) <= set(evidence.pyspy)
    assert evidence.pyspy_samples == {}  # no sampling window asked for
    # Side by side, whatever the load: every process's first call started before the first
    # call could have ended (1 s). One after another, they would start >= 1 s apart.
    first_calls = {}
    for stamp, pid in pyspy_call_starts(tmp_path):
        first_calls.setdefault(pid, stamp)
    assert len(first_calls) == len(ranks.pids) + 1, first_calls
    assert max(first_calls.values()) - min(first_calls.values()) < 1, first_calls


def test_it_samples_each_training_process_over_the_window(collected, ranks):
    # py-spy record --format raw --idle --threads: the main thread's stacks with their counts.
    evidence, _ = collected
    for pid in ranks.pids:
        lines = evidence.pyspy_samples[pid].splitlines()
        main = [line for line in lines if line.startswith(f"thread ({pid}): MainThread;")]
        assert main and all(line.rsplit(" ", 1)[1].isdigit() for line in main)
        assert any("fake_all_gather" in line for line in main)
    assert ranks.not_python_pid not in evidence.pyspy_samples  # its dump failed: no window


def test_a_script_that_stops_before_its_end_is_a_failure_said_in_words(sshd, ranks):
    # run_script (the watch's reads, the Slurm and Ray reads): a script that ends well but before
    # its end frame fails the node with the probe's own words, a text for the page and the log.
    run = run_script(
        sshd.target(),
        ranks.plan(),
        lambda nonce: f"printf 'HDPROBE1 %s\\nHD1 one 2\\nhi' {nonce}\n".encode(),
    )
    assert run.failure is not None and not run.complete
    assert isinstance(run.failure.text, str)
    assert "exited with status 0 before finishing" in run.failure.text, run.failure.text
