"""Lines older than the job (issue 19): an earlier run's OOM kill, Xid or segfault in a node's
dmesg, or a log appended across launches, is never quoted as evidence of tonight's hang; the
job's start comes from its processes (ps), else from the first line of a log held whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from analysis import jobtime
from tests.analysis.sample_evidence import (
    diagnosis_json,
    drop_rank_process,
    load_snapshot,
    pid_of_rank,
    read_public,
)

XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus."


def _ctime(at: datetime) -> str:
    return at.strftime("[%a %b %d %H:%M:%S %Y]")


def _kinds(result, kind):
    return [e["text"] for e in result["evidence"] if e["kind"] == kind]


def test_a_time_is_old_only_past_the_slack_before_a_known_start():
    start = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    assert jobtime.before_job(start - timedelta(minutes=3), start)
    assert not jobtime.before_job(start - timedelta(minutes=1), start)  # clock skew
    assert not jobtime.before_job(None, start) and not jobtime.before_job(start, None)
    assert jobtime.line_before_job("[Sun Mar 30 08:24:00 2025] Out of memory: ...", start)
    assert not jobtime.line_before_job("[12345.678] Out of memory: ...", start)  # no wall time
    assert jobtime.job_started([None, start + timedelta(1), start]) == start
    logs = [start - timedelta(hours=1)]
    assert jobtime.job_started([None], logs) == logs[0]  # no process: the whole logs' first
    assert jobtime.job_started([start], logs) == start  # a process's start wins
    text = "banner without a time\n2026-11-29 09:15:14,163 INFO [rank3] starting\n"
    assert jobtime.first_stamp(text) == datetime(2026, 11, 29, 9, 15, 14, 163000, tzinfo=UTC)


def test_kernel_lines_from_before_the_job_are_not_quoted_and_those_during_it_are():
    snapshot = drop_rank_process(load_snapshot("outside"), 3)
    node = snapshot.nodes[0]
    during = node.collected_at - timedelta(seconds=2)
    old = datetime(2026, 1, 5, 3, 0, tzinfo=UTC)
    node.dmesg = (
        f"{_ctime(old)} {XID_79}\n"
        f"{_ctime(old)} python[4242]: segfault at 0 ip 00007f sp 00007ffd error 4\n"
    )
    result = diagnosis_json(snapshot)
    assert _kinds(result, "xid") == [] and _kinds(result, "segfault") == []
    assert result["job_started_at"] and datetime.fromisoformat(result["job_started_at"]) > old

    node.dmesg += f"{_ctime(during)} {XID_79}\n"
    xids = _kinds(diagnosis_json(snapshot), "xid")
    assert xids and all(_ctime(during) in text for text in xids)


def test_an_old_kill_of_a_reused_pid_does_not_explain_a_rank_that_left():
    before = load_snapshot("outside")
    pid = pid_of_rank(before.nodes[0], 3)
    killed = drop_rank_process(before, 3)
    # Last year's kill of a process that happened to have rank 3's pid.
    killed.nodes[0].dmesg = read_public("dmesg_oom_ctime.txt").replace("7899", str(pid))
    result = diagnosis_json(killed, previous=before)
    assert result["missing_ranks"] == [3]
    assert _kinds(result, "dmesg_oom") == []
    assert "OOM killer" not in result["summary"]


def test_without_a_process_the_job_starts_at_its_first_whole_log_line():
    snapshot = load_snapshot("outside")
    node = snapshot.nodes[0]
    node.ps, node.environ, node.pyspy = None, {}, {}  # every process gone
    first = min(
        jobtime.first_stamp(text) for text in node.logs.values() if jobtime.first_stamp(text)
    )
    node.dmesg = f"{_ctime(first - timedelta(hours=5))} {XID_79}\n"
    result = diagnosis_json(snapshot)
    assert datetime.fromisoformat(result["job_started_at"]) == first
    assert _kinds(result, "xid") == []
    # A log cut at the cap has lost its head: its first line is no start.
    node.truncated = [f"logs:{path}" for path in node.logs]
    assert diagnosis_json(snapshot)["job_started_at"] is None


def test_a_log_error_from_an_earlier_launch_is_not_quoted():
    snapshot = drop_rank_process(load_snapshot("outside"), 3)
    node = snapshot.nodes[0]
    path = next(p for p in node.logs if p.endswith("rank3.log"))
    stale = "2026-01-05 03:00:00,000 ERROR [rank3] RuntimeError: CUDA error: an illegal memory"
    node.logs[path] = f"{stale}\n{node.logs[path]}"
    result = diagnosis_json(snapshot)
    assert not any(stale in text for text in _kinds(result, "log_error"))
