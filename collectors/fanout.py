"""One worker process visiting many nodes at once: a batch of visits per task, a bounded pool.

Celery's prefork pool runs one task per process, and a node's visit mostly waits on its
node; so one task (`tasks.collect_nodes`) takes a batch of a snapshot's nodes and visits
FANOUT of them at a time in threads. The pool's threads only run SSH visits
(`node_work.node_visit`: no database, so a batch holds one connection, not one per thread);
the task's own thread claims the batch, retries a node once after a blip, makes each
finished node's rows and parse while the others are out (`node_work.node_result_prepare`:
CPU and reads), and stores finished nodes in groups (`node_work.node_results_record`: one
transaction per group, not per node, that then only checks and writes: the last node is
committed about one node's map after its visit ends, not a whole group's). When its threads
have room and its own nodes are all under way, it takes more of its snapshot's pending nodes
(their batch's task, when it starts, finds them taken), until `steal_until`: a slow node
holds one thread, not a worker process, and the work spreads over whichever processes are
free. Every visit keeps its own SSH deadlines (remote.py).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace

from hangdesk.budget import TIME_BUDGET

from . import node_work
from .node_work import NodeWork, Prepared
from .nodeparse import Ahead
from .outcomes import NodeVisit

log = logging.getLogger(__name__)

# Finished nodes are stored at most this long after they finish, or once this many wait.
FLUSH_S = 0.25
FLUSH_NODES = 32


@dataclass(frozen=True)
class BatchOutcome:
    visited: int  # nodes this task finished (its own and those it took)
    taken: int  # of those, nodes of other batches it took
    analysis_due: tuple[int, ...]  # snapshots whose last node this task stored


def batch_visit(
    *,
    collection_ids: tuple[int, ...],
    task_id: str,
    fanout: int,
    steal_until: float,
    clock: Callable[[], float] = time.monotonic,
    after_store: Callable[[int], None] = lambda snapshot_id: None,
) -> BatchOutcome:
    """Visit the batch's nodes `fanout` at a time, store them as they finish; see above."""
    own = node_work.node_work_claim(task_id=task_id, collection_ids=collection_ids)
    if not own:
        return BatchOutcome(0, 0, ())  # redelivered after it finished, or all taken by others
    with ThreadPoolExecutor(max_workers=fanout, thread_name_prefix="node-visit") as pool:
        batch = _Batch(task_id, own[0].snapshot_id, fanout, pool, after_store, deque(own), Ahead())
        flushed = clock()
        while True:
            batch.submit_queued()
            if batch.take_more(clock, steal_until):
                continue
            if not batch.in_flight:
                break
            batch.collect()
            if batch.finished and (
                len(batch.finished) >= FLUSH_NODES
                or clock() - flushed >= FLUSH_S
                or not batch.in_flight
            ):
                batch.store()
                flushed = clock()
    if batch.finished:
        batch.store()
    return BatchOutcome(batch.visited, batch.taken, tuple(sorted(batch.due)))


@dataclass
class _Batch:
    """One task's visits under way: the nodes waiting for a thread, those being visited, those
    visited and waiting to be stored, and what was stored."""

    task_id: str
    snapshot_id: int
    fanout: int
    pool: ThreadPoolExecutor
    after_store: Callable[[int], None]
    queue: deque[NodeWork]
    ahead: Ahead
    in_flight: dict[Future[tuple[NodeVisit, float]], NodeWork] = field(default_factory=dict)
    finished: list[tuple[NodeWork, NodeVisit]] = field(default_factory=list)
    prepared: dict[int, Prepared] = field(default_factory=dict)  # of finished, by collection id
    ended: float = 0.0  # when the last of the finished nodes' visits ended (monotonic)
    due: set[int] = field(default_factory=set)  # snapshots whose last node was stored
    visited: int = 0
    taken: int = 0
    more: bool = True  # the snapshot may still have pending nodes to take
    shared: bool = False  # took a share of the last pending nodes: no more until a visit ends

    def submit_queued(self) -> None:
        while self.queue and len(self.in_flight) < self.fanout:
            work = self.queue.popleft()
            self.in_flight[self.pool.submit(_visit, work)] = work

    def take_more(self, clock: Callable[[], float], steal_until: float) -> bool:
        """Claims more of the snapshot's pending nodes while the pool has room and the time to
        take them lasts; True when it took some (they wait in the queue)."""
        room = self.fanout - len(self.in_flight)
        # Take more in bunches (a quarter of the pool), not one query per finished node.
        if not (self.more and room and (room >= max(1, self.fanout // 4) or not self.in_flight)):
            return False
        if self.shared and self.in_flight:
            return False  # the rest of the last ones are left to the others a while
        if clock() >= steal_until:
            self._no_more("its time to take more is over")
            return False
        more_work = node_work.node_work_claim(
            task_id=self.task_id, snapshot_id=self.snapshot_id, limit=room
        )
        self.taken += len(more_work)
        self.queue.extend(more_work)
        self.shared = 0 < len(more_work) < room
        if not more_work:
            self._no_more("none left")
        return bool(more_work)

    def _no_more(self, why: str) -> None:
        """Said in the worker's log: the fleet's end, this process's part of the tail."""
        self.more = False
        log.info(
            "taking no more nodes of snapshot %s (%s): %d being visited, %d to store",
            self.snapshot_id, why, len(self.in_flight) + len(self.queue), len(self.finished),
        )  # fmt: skip

    def collect(self) -> None:
        """Waits up to FLUSH_S for visits to end: a transient failure with an attempt left is
        visited again after the retry delay, the rest are prepared and wait to be stored."""
        done, _ = wait(self.in_flight, timeout=FLUSH_S, return_when=FIRST_COMPLETED)
        self.shared = self.shared and not done
        for future in done:
            work, (visit, ended) = self.in_flight.pop(future), future.result()
            if node_work.node_visit_retryable(work, visit):
                # Said in the worker's log: a retry is otherwise seen only in the attempts.
                log.info(
                    "visiting %s again in %s s (attempt %d): %s", work.node_name,
                    TIME_BUDGET.retry_delay_s, work.attempts + 1, visit.failure.text,
                )  # fmt: skip
                again = replace(work, attempts=work.attempts + 1)
                self.in_flight[self.pool.submit(_after, TIME_BUDGET.retry_delay_s, again)] = again
            else:
                self.finished.append((work, visit))
                self.ended = max(self.ended, ended)
                self.prepared[work.collection_id] = node_work.node_result_prepare(
                    work, visit, self.ahead
                )

    def store(self) -> None:
        started = time.monotonic()
        due = node_work.node_results_record(
            task_id=self.task_id, results=self.finished, prepared=self.prepared
        )
        # The hand-off to the final verdict: how long its last node's evidence waited, and how
        # much of that was the store itself (its rows' finished_at is stamped as it starts).
        now = time.monotonic()
        log.log(
            logging.INFO if due or not self.more else logging.DEBUG,
            "stored %d nodes of snapshot %s %.3f s after the last of their visits ended, "
            "in a store of %.3f s%s",
            len(self.finished), self.snapshot_id, now - self.ended, now - started,
            " (its last node: analysis due)" if due else "",
        )  # fmt: skip
        self.due.update(due)
        if self.snapshot_id not in self.due:
            self.after_store(self.snapshot_id)  # a provisional verdict may be due
        self.visited += len(self.finished)
        self.finished, self.prepared = [], {}
        self.ahead.stored()


def _visit(work: NodeWork) -> tuple[NodeVisit, float]:
    visit = node_work.node_visit(work)
    return visit, time.monotonic()


def _after(delay_s: float, work: NodeWork) -> tuple[NodeVisit, float]:
    time.sleep(delay_s)
    return _visit(work)


def batches(collection_ids: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    return [collection_ids[i : i + size] for i in range(0, len(collection_ids), size)]
