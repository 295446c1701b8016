"""When the job began, and which lines are older than that.

A node's kernel log keeps days of lines: an earlier run's OOM kill or Xid sits in `dmesg`
beside tonight's, and a log appended to across launches holds the last run's errors. A line
stamped before the job began says nothing about it: the evidence viewer marks such lines and
the verdict never quotes them (issue 19). The job began when its first process started (ps:
the collection's time minus the process's elapsed time), else at the first stamped line of a
job log the collection holds whole (a log cut at the cap has lost its head, and its first
line is no start).

Pure: no Django. Line times come from `analysis.signals.times.line_time` (ISO, glog,
`dmesg -T`, syslog); a line without a readable time is never called old.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from analysis.signals.times import line_time

# Clock skew between a node's kernel log and ps, and dmesg -T's drift after suspend.
JOB_START_SLACK = timedelta(minutes=2)
# A log's first stamp is looked for among its first lines only (a banner, an env dump).
FIRST_STAMP_LINES = 50


def job_started(
    process_starts: Iterable[datetime | None], log_starts: Iterable[datetime | None] = ()
) -> datetime | None:
    """The job's start: its earliest process start, else the earliest first line of its
    whole logs, else None (nothing is then called old)."""
    starts = [t for t in process_starts if t is not None]
    if not starts:
        starts = [t for t in log_starts if t is not None]
    return min(starts) if starts else None


def first_stamp(text: str | None, now: datetime | None = None) -> datetime | None:
    """The time of the first stamped line among a log's first lines."""
    if not text:
        return None
    for line in text.split("\n", FIRST_STAMP_LINES)[:FIRST_STAMP_LINES]:
        at = line_time(line, now)
        if at is not None:
            return at
    return None


def before_job(at: datetime | None, started: datetime | None) -> bool:
    """True for a time older than the job's start (less the slack): an earlier run's."""
    return at is not None and started is not None and at < started - JOB_START_SLACK


def line_before_job(line: str, started: datetime | None, now: datetime | None = None) -> bool:
    """True for a line stamped before the job began."""
    return started is not None and before_job(line_time(line, now), started)
