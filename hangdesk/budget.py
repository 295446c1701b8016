"""The console's time budget: every time limit of every task is derived from this one place.

    connect + commands on the node  ->  one node's visit (visit_s, the SSH deadline)
    taking more nodes (steal_s), then
    a visit, its retry, storing      ->  the node task's soft limit; + grace: its hard limit
    analysis_s                       ->  the analysis task's soft limit; + grace: its hard limit
    a node's check, a job's read     ->  what a page waits for; that is their tasks' soft limit
    one cluster's watch period       ->  the watch's tick (and a preflight); + grace: its lease
    housekeeping_s                   ->  beat's small tasks, the watch's follow-ups, pages
    the longest hard limit, twice    ->  the broker's visibility timeout (redelivery_s)
    redelivery + a node task's run   ->  the age at which the sweep calls a node's worker lost

Imported by the settings (visibility timeout, default task limits), every tasks.py (their
limits), the services (attempts, the sweep's age, the watch's lease) and the collector (SSH
timeouts). It starts from the probe's own bounds (plan.py). Pure: no Django.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from hangdesk.plan import COMMAND_S, CONNECT_S, VISIT_S


@dataclass(frozen=True)
class TaskLimits:
    soft_s: float  # SoftTimeLimitExceeded is raised in the task: time to clean up
    hard_s: float  # the worker process is killed


@dataclass(frozen=True)
class TimeBudget:
    # TCP connect; the SSH handshake as a whole may take twice this.
    connect_s: float = CONNECT_S
    # One command on the node (a py-spy dump, a log tail), stopped by `timeout` there.
    command_s: float = COMMAND_S
    # One node's whole visit, connect to last byte: the collector's hard deadline.
    visit_s: float = VISIT_S
    # After the visit: storing up to 64 MiB of evidence and finishing the snapshot.
    store_s: float = 90.0
    # A node task visits a batch of nodes at once (collectors/fanout.py) and, while its
    # threads have room, takes more of its snapshot's pending nodes: for this long (short
    # enough that its hard limit stays within the analysis task's, the broker's redelivery too).
    steal_s: float = 55.0
    # Analysing one snapshot and storing its verdict (4,096 ranks take a few seconds).
    analysis_s: float = 270.0
    # A Ray head's second visit: up to four `ray` calls for one job (collectors/rayjob.py).
    ray_head_visit_s: float = 100.0
    # The watch's read of one node (watch/probe.sh): its connect, and the whole read.
    watch_connect_s: float = 5.0
    watch_read_s: float = 15.0
    # One watched cluster's period: every node read, WATCH_NODE_THREADS at a time.
    watch_tick_s: float = 90.0
    # Beat's small tasks (heartbeat, stale sweep, the watch's dispatch), the watch's steps
    # after a raise, a page's delivery, and any task not given limits of its own.
    housekeeping_s: float = 30.0
    # Between a soft limit and the hard kill.
    grace_s: float = 30.0
    # Visits of one node per snapshot (one retry for a blip, short enough for 3 a.m.) ...
    attempts: int = 2
    # ... the retry after this many seconds.
    retry_delay_s: int = 2

    def _limits(self, soft_s: float) -> TaskLimits:
        return TaskLimits(soft_s=soft_s, hard_s=soft_s + self.grace_s)

    @property
    def node_task(self) -> TaskLimits:
        """A batch of visits at once: the last one it takes starts before steal_s, may be
        visited twice (after retry_delay_s), then stored."""
        visits = self.attempts * self.visit_s + (self.attempts - 1) * self.retry_delay_s
        return self._limits(self.steal_s + visits + self.store_s)

    @property
    def analysis_task(self) -> TaskLimits:
        return self._limits(self.analysis_s)

    @property
    def housekeeping_task(self) -> TaskLimits:
        return self._limits(self.housekeeping_s)

    @property
    def node_check_wait_s(self) -> dict[str, float]:
        """How long a page waits for a worker's check of a node: its key file is read at
        once; its connection is a handshake (twice the connect) and a login."""
        return {"key": 5.0, "connection": 3 * self.connect_s + 5.0}

    @property
    def node_check_task(self) -> TaskLimits:
        """A check nobody waits for any more is of no use: its task stops when the page stops
        waiting."""
        return self._limits(max(self.node_check_wait_s.values()))

    @property
    def job_read_wait_s(self) -> dict[str, float]:
        """How long a page waits for a worker's read of a scheduler's job: a Slurm
        controller's (a connection, handshake and login, and its two commands) or a Ray
        head's (two visits: one `ray` call, then the job's)."""
        return {
            "slurm": 2 * self.connect_s + 2 * self.command_s + 10.0,
            "ray": 2 * self.connect_s + self.command_s + self.ray_head_visit_s + 10.0,
        }

    @property
    def job_read_task(self) -> TaskLimits:
        return self._limits(max(self.job_read_wait_s.values()))

    @property
    def watch_tick_task(self) -> TaskLimits:
        return self._limits(self.watch_tick_s)

    @property
    def watch_lease(self) -> timedelta:
        """A watch's claim (a period, a preflight) outlives the task that holds it: a worker
        killed mid-period leaves a claim that expires after this."""
        return timedelta(seconds=self.watch_tick_task.hard_s + self.grace_s)

    @property
    def redelivery_s(self) -> int:
        """The broker's visibility timeout: a message whose worker died unacknowledged comes
        back after this long, so it must outlast the longest task with room to spare (a
        worker holds a message it has prefetched or whose retry it waits for, too)."""
        return math.ceil(2 * max(limits.hard_s for limits in self.every_task()))

    def every_task(self) -> tuple[TaskLimits, ...]:
        return (
            self.node_task,
            self.analysis_task,
            self.housekeeping_task,
            self.node_check_task,
            self.job_read_task,
            self.watch_tick_task,
        )

    @property
    def stale_after(self) -> timedelta:
        """A node still pending or running this long after it began is failed by the sweep:
        its worker died, the broker redelivered the task and that copy had its full run."""
        return timedelta(seconds=self.redelivery_s + self.node_task.hard_s)


TIME_BUDGET = TimeBudget()
