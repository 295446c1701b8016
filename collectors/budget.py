"""The snapshot's time budget: every time limit of the pipeline is derived from this one place.

    connect + commands on the node  ->  one node's visit (visit_s, the SSH deadline)
    visit + storing its evidence     ->  the node task's soft limit; + grace: its hard limit
    analysis_s                       ->  the analysis task's soft limit; + grace: its hard limit
    the longest hard limit, twice    ->  the broker's visibility timeout (redelivery_s)
    redelivery + a node task's run   ->  the age at which the sweep calls a node's worker lost

Imported by the settings (visibility timeout, default task limits), the tasks (their limits),
the services (attempts, the sweep's age) and the collector (SSH timeouts). Pure: no Django.
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
class SnapshotBudget:
    # TCP connect; the SSH handshake as a whole may take twice this.
    connect_s: float = CONNECT_S
    # One command on the node (a py-spy dump, a log tail), stopped by `timeout` there.
    command_s: float = COMMAND_S
    # One node's whole visit, connect to last byte: the collector's hard deadline.
    visit_s: float = VISIT_S
    # After the visit: storing up to 64 MiB of evidence and finishing the snapshot.
    store_s: float = 90.0
    # Analysing one snapshot and storing its verdict (4,096 ranks take a few seconds).
    analysis_s: float = 270.0
    # Beat's small tasks (heartbeat, stale sweep), and any task not given limits of its own.
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
        return self._limits(self.visit_s + self.store_s)

    @property
    def analysis_task(self) -> TaskLimits:
        return self._limits(self.analysis_s)

    @property
    def housekeeping_task(self) -> TaskLimits:
        return self._limits(self.housekeeping_s)

    @property
    def redelivery_s(self) -> int:
        """The broker's visibility timeout: a message whose worker died unacknowledged comes
        back after this long, so it must outlast the longest task with room to spare (a
        worker holds a message it has prefetched or whose retry it waits for, too)."""
        longest = max(
            t.hard_s for t in (self.node_task, self.analysis_task, self.housekeeping_task)
        )
        return math.ceil(2 * longest)

    @property
    def stale_after(self) -> timedelta:
        """A node still pending or running this long after it began is failed by the sweep:
        its worker died, the broker redelivered the task and that copy had its full run."""
        return timedelta(seconds=self.redelivery_s + self.node_task.hard_s)


SNAPSHOT_BUDGET = SnapshotBudget()
