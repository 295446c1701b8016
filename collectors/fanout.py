"""One worker process visiting many nodes at once: a batch of visits per task, a bounded pool.

Celery's prefork pool runs one task per process, and a node's visit mostly waits on its
node; so one task (`tasks.collect_nodes`) takes a batch of a snapshot's nodes and visits
FANOUT of them at a time in threads. The pool's threads only run SSH visits
(`services.node_visit`: no database, so a batch holds one connection, not one per thread);
the task's own thread claims the batch, retries a node once after a blip, and stores
finished nodes in groups (`services.node_results_record`: one transaction per group, not
per node). When its threads have room and its own nodes are all under way, it takes more of
its snapshot's pending nodes (their batch's task, when it starts, finds them taken), until
`steal_until`: a slow node holds one thread, not a worker process, and the work spreads
over whichever processes are free. Every visit keeps its own SSH deadlines (remote.py).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from hangdesk.budget import TIME_BUDGET

from . import services
from .outcomes import NodeVisit
from .services import NodeWork

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
    own = services.node_work_claim(task_id=task_id, collection_ids=collection_ids)
    if not own:
        return BatchOutcome(0, 0, ())  # redelivered after it finished, or all taken by others
    snapshot_id = own[0].snapshot_id
    queue: deque[NodeWork] = deque(own)
    in_flight: dict[Future[NodeVisit], NodeWork] = {}
    finished: list[tuple[NodeWork, NodeVisit]] = []
    due: set[int] = set()
    visited = taken = 0
    more = True  # the snapshot may still have pending nodes to take
    flushed = clock()
    with ThreadPoolExecutor(max_workers=fanout, thread_name_prefix="node-visit") as pool:
        while True:
            while queue and len(in_flight) < fanout:
                work = queue.popleft()
                in_flight[pool.submit(services.node_visit, work)] = work
            room = fanout - len(in_flight)
            # Take more in bunches (a quarter of the pool), not one query per finished node.
            if more and room and (room >= max(1, fanout // 4) or not in_flight):
                if clock() < steal_until:
                    more_work = services.node_work_claim(
                        task_id=task_id, snapshot_id=snapshot_id, limit=room
                    )
                    taken += len(more_work)
                    queue.extend(more_work)
                    more = bool(more_work)
                    if more_work:
                        continue
                else:
                    more = False
            if not in_flight:
                break
            done, _ = wait(in_flight, timeout=FLUSH_S, return_when=FIRST_COMPLETED)
            for future in done:
                work, visit = in_flight.pop(future), future.result()
                if services.node_visit_retryable(work, visit):
                    again = replace(work, attempts=work.attempts + 1)
                    in_flight[pool.submit(_after, TIME_BUDGET.retry_delay_s, again)] = again
                else:
                    finished.append((work, visit))
            if finished and (
                len(finished) >= FLUSH_NODES or clock() - flushed >= FLUSH_S or not in_flight
            ):
                due.update(services.node_results_record(task_id=task_id, results=finished))
                if snapshot_id not in due:
                    after_store(snapshot_id)  # a provisional verdict may be due
                visited += len(finished)
                finished, flushed = [], clock()
    if finished:
        due.update(services.node_results_record(task_id=task_id, results=finished))
        if snapshot_id not in due:
            after_store(snapshot_id)
        visited += len(finished)
    return BatchOutcome(visited, taken, tuple(sorted(due)))


def _after(delay_s: float, work: NodeWork) -> NodeVisit:
    time.sleep(delay_s)
    return services.node_visit(work)


def batches(collection_ids: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    return [collection_ids[i : i + size] for i in range(0, len(collection_ids), size)]
