"""A large snapshot's final verdict made by a reader that read its nodes' parses as they
arrived, so that after the last node only the last few are read back before the merge.

From the click (settings.HANGDESK_READ_AHEAD_NODES nodes or more), a reader on a process of
its own (the "ahead" queue) holds a lease on the snapshot, renewed every RENEW_S by a thread
beside it. Every READ_S it reads back the parses stored since its last read (each decoded
once, held by collection and by the record it came from), and once, the merge of the snapshot
the verdict compares with; after a read, the first verdict when it is claimed (95 % in, or the
slowest past their deadline: the early worker leaves it to a live reader); every LOOK_S it
looks whether the last node is in, sooner when the last node's store announces it
(PostgreSQL's NOTIFY, heard by a thread of its own: `_LastNodeWake`). Once it is, it makes
the final verdict as the analysis worker would (`services.snapshot_analyse`, given what it
holds: a held parse is used only while its node's record is still the one it was read from,
the rest are read back there).

The final verdict task (tasks.analyse_snapshot) leaves it to a live reader and looks again
every HANDOVER_CHECK_S: a reader that dies (its worker killed, its database gone) stops
renewing, its lease expires after LEASE_S, and the task makes the verdict itself; one that
stops reading (its lease lost, or past READ_FOR_S: then a new reader follows) releases its
lease at once. The lease is two
columns updated by conditional UPDATEs: the same on SQLite as on PostgreSQL.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone

from analysis.diagnosis import no_cyclic_gc
from hangdesk.budget import TIME_BUDGET

from . import gpuclick, node_work, nodeparse, provisional, selectors, services
from .models import Snapshot, SnapshotStatus

log = logging.getLogger(__name__)

LOOK_S = 0.2  # between two looks at the status (is the last node in?): one small query
WAKE_POLL_S = 0.25  # the wake's thread sees the reader is done within this
READ_S = 1.0  # between two reads of the parses stored meanwhile
RENEW_S = 1.0  # between two renewals of the lease
LEASE_S = 5.0  # a reader that stopped renewing is dead this long after its last renewal
HANDOVER_CHECK_S = 1.0  # the final verdict task's next look while a reader makes the verdict
# A reader's task has the analysis task's limits (the budget's, so the broker's redelivery and
# the sweep stay as they are): it reads for two thirds of them (180 s), then hands over to a
# new reader (tasks.py queues it; it reads what is stored again), which leaves a third for the
# verdict it may make (6x the final's run at 32,000 ranks on a loaded 2-core machine).
LIMITS = TIME_BUDGET.analysis_task
READ_FOR_S = TIME_BUDGET.analysis_s * 2 / 3


def worth_reading_ahead(nodes: int) -> bool:
    """Small snapshots are read back after their last node in well under a second."""
    threshold = settings.HANGDESK_READ_AHEAD_NODES
    return bool(threshold) and nodes >= threshold


# --- the lease ----------------------------------------------------------------------------


def _until() -> datetime:
    return timezone.now() + timedelta(seconds=LEASE_S)


def lease_claim(snapshot_id: int, token: str) -> bool:
    """Take the snapshot's lease while it is collecting and no live reader holds it."""
    free = Q(reader_until__isnull=True) | Q(reader_until__lt=timezone.now())
    return bool(
        Snapshot.objects.filter(free, pk=snapshot_id, status=SnapshotStatus.RUNNING).update(
            reader=token, reader_until=_until()
        )
    )


def lease_renew(snapshot_id: int, token: str) -> bool:
    """Renewed while it is still this reader's (False: lost, or the snapshot is gone)."""
    return bool(Snapshot.objects.filter(pk=snapshot_id, reader=token).update(reader_until=_until()))


def lease_release(snapshot_id: int, token: str) -> None:
    Snapshot.objects.filter(pk=snapshot_id, reader=token).update(reader="", reader_until=None)


def reader_alive(snapshot_id: int) -> bool:
    """A reader holds the snapshot's lease (for the first verdict's tasks: it makes it)."""
    return Snapshot.objects.filter(pk=snapshot_id, reader_until__gt=timezone.now()).exists()


def final_turn(snapshot_id: int) -> str:
    """For the final verdict task: "reader" (a live reader makes it: look again later), "done"
    (nothing to make: the snapshot is not waiting for its verdict), or "mine"."""
    found = Snapshot.objects.filter(pk=snapshot_id).values_list("status", "reader_until").first()
    if found is None or found[0] != SnapshotStatus.ANALYSING:
        return "done"
    if found[1] is not None and found[1] > timezone.now():
        return "reader"
    return "mine"


class _Lease:
    """The lease renewed from a thread of its own (the reader's own thread spends seconds in
    one merge), released on the way out; `lost` once a renewal failed."""

    def __init__(self, snapshot_id: int, token: str) -> None:
        self.snapshot_id, self.token = snapshot_id, token
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="read-ahead-lease", daemon=True)

    def __enter__(self) -> _Lease:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        lease_release(self.snapshot_id, self.token)

    def _renew(self) -> None:
        try:
            while not self._stop.wait(RENEW_S):
                if not lease_renew(self.snapshot_id, self.token):
                    self.lost = True
                    return
        except DatabaseError:
            log.exception("renewing the read-ahead lease of snapshot %s failed", self.snapshot_id)
            self.lost = True
        finally:
            connection.close()  # this thread's own connection


# --- the reader ---------------------------------------------------------------------------


def parses_read_ahead(
    *,
    snapshot_id: int,
    read_for_s: float = READ_FOR_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] | None = None,
) -> str:
    """Read the snapshot's parses as they are stored and make its final verdict once the last
    node is in. Says how it ended: "verdict", "not claimed" (another reader, or the snapshot
    no longer collecting), "finished elsewhere", "handed over" (to the final verdict task:
    its lease lost), or "read long enough" (past `read_for_s`, still collecting). `sleep`:
    the wait between two looks (default: LOOK_S, cut short by the last node's notice)."""
    token = uuid.uuid4().hex
    if not lease_claim(snapshot_id, token):
        return "not claimed"
    ahead = services.ReadAhead()
    try:
        return _read_until_done(snapshot_id, ahead, read_for_s, clock, sleep, token)
    finally:
        _free_apart(ahead)


def _read_until_done(snapshot_id, ahead, read_for_s, clock, sleep, token) -> str:
    last, until, read_at, compared = 0, clock() + read_for_s, None, False
    with _Lease(snapshot_id, token) as lease, _held_apart(), _LastNodeWake(snapshot_id) as wake:
        sleep = sleep or wake.wait
        while not lease.lost:
            status = Snapshot.objects.filter(pk=snapshot_id).values_list("status", flat=True)[0]
            if status == SnapshotStatus.ANALYSING:
                return _final(snapshot_id, ahead)
            if status != SnapshotStatus.RUNNING:
                return "finished elsewhere"
            if clock() >= until:
                return "read long enough"
            ahead.spent.clear()  # a first verdict's records: freed now, while it waits
            if read_at is None or clock() - read_at >= READ_S:
                last, read_at = _read_new(snapshot_id, ahead, last), clock()
                if not compared:
                    _compared_ahead(snapshot_id, ahead)
                    compared = True
                if provisional.provisional_awaited(snapshot_id):
                    # The first verdict, from what is held: the early worker left it to this
                    # reader (reading every parse back there cost ~2 s of CPU at 4,000
                    # nodes, beside the last nodes' stores and then the final verdict).
                    provisional.snapshot_provisional_analyse(snapshot_id=snapshot_id, ahead=ahead)
            sleep(LOOK_S)
    return "handed over"


class _LastNodeWake:
    """The reader's wait between two looks, cut short once the last node's store announces the
    move to analysis (`node_work.snapshot_finish_if_complete`'s NOTIFY): heard on a connection
    of its own, in a thread that does nothing else, so no notice is missed while the reader
    reads (psycopg hands a notice that came during another query to handlers only). The look
    still decides: unheard (SQLite, a notice sent before the LISTEN, a lost connection) the
    wait is LOOK_S, as without it."""

    def __init__(self, snapshot_id: int) -> None:
        self.channel = node_work.last_node_channel(snapshot_id)
        self._heard, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._listen, name="read-ahead-wake", daemon=True)

    def __enter__(self) -> _LastNodeWake:
        if connection.vendor == "postgresql":
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def wait(self, seconds: float) -> None:
        self._heard.wait(seconds)

    def _listen(self) -> None:
        import psycopg

        try:
            with connection.cursor() as cursor:
                cursor.execute(f'LISTEN "{self.channel}"')
            raw = connection.connection
            while not self._stop.is_set():
                for _ in raw.notifies(timeout=WAKE_POLL_S, stop_after=1):
                    self._heard.set()
                    return
        except (DatabaseError, psycopg.Error):
            log.warning("the reader of %s hears no notice: it looks every %s s", self.channel,
                        LOOK_S, exc_info=True)  # fmt: skip
        finally:
            connection.close()  # this thread's own connection


@contextmanager
def _held_apart() -> Iterator[None]:
    """What is held is frozen out of the cycle collector's sight after each read (millions of
    acyclic records: each full collection while the nodes arrive walked them all), and given
    back to it when the reader is done."""
    try:
        yield
    finally:
        gc.unfreeze()


_freeing: list[threading.Thread] = []  # the reader's frees under way (see _free_apart)


def _free_apart(ahead: services.ReadAhead) -> None:
    """What the reader held (every node's parse, and what the verdict was made of: ~1.4
    million records at 4,000 nodes, 0.3-0.6 s to free) freed on a thread of its own once it
    is done, so its task ends with its verdict stored; the thread holds the last reference
    and ends when all is freed, so nothing outlives it into the next snapshot's reader."""
    held = [ahead.parses, ahead.spent, ahead.compared]
    ahead.parses, ahead.spent, ahead.compared = {}, [], None
    _freeing[:] = [t for t in _freeing if t.is_alive()]
    thread = threading.Thread(target=_free, args=(held,), name="read-ahead-free", daemon=True)
    _freeing.append(thread)
    thread.start()


def _free(held: list) -> None:
    # One piece at a time, so the other threads get the interpreter between two (a free is
    # one call that holds it to the end): what the verdict was made of first (it refers to
    # the parses: a piece of tens of milliseconds each), then a node's parse at a time.
    parses, spent, _ = held
    held.clear()  # `compared`, if it was the last reference to it
    while spent:
        spent.pop()
    while parses:
        parses.popitem()


def freed(timeout: float | None = None) -> bool:
    """Wait for the readers' frees under way (tests; a worker never waits for them)."""
    for thread in list(_freeing):
        thread.join(timeout)
    return not any(t.is_alive() for t in _freeing)


def _read_new(snapshot_id: int, ahead: services.ReadAhead, after: int) -> int:
    for collection_id, record_id, parse in nodeparse.parses_read_since(snapshot_id, after):
        after = max(after, record_id)
        if parse is None:
            ahead.parses.pop(collection_id, None)  # not usable: read back (and logged) again
        else:
            ahead.parses[collection_id] = (record_id, parse)
    gc.freeze()
    return after


def _compared_ahead(snapshot_id: int, ahead: services.ReadAhead) -> None:
    """The merge of the snapshot the verdict compares with, made while the nodes arrive (it is
    finished already: the verdict uses it while it is still the one compared with)."""
    previous = selectors.previous_snapshot(Snapshot.objects.get(pk=snapshot_id))
    if previous is not None:
        ahead.previous_pk, ahead.compared = previous.pk, services.compared_of(previous)


def _final(snapshot_id: int, ahead: services.ReadAhead) -> str:
    # As tasks.analyse_snapshot: the GPU's hour (waited for, bounded), then the verdict.
    started = time.monotonic()
    gpuclick.series_before_analysis(snapshot_id=snapshot_id)
    gpu_s = time.monotonic() - started
    # No full collection on the way: it would walk every held parse (0.3-0.5 s at 4,000
    # nodes) to find nothing, and the verdict's records are acyclic like them.
    with no_cyclic_gc():
        stored = services.snapshot_analyse(snapshot_id=snapshot_id, ahead=ahead)
    ahead.spent.append(stored)  # the stored diagnosis too: freed with the rest, apart
    log.info(
        "final verdict of snapshot %s %s in %.2f s (the GPU's hour %.2f s), %d parses read ahead",
        snapshot_id, "made" if stored else "made elsewhere", time.monotonic() - started, gpu_s,
        len(ahead.parses),
    )  # fmt: skip
    return "verdict" if stored else "finished elsewhere"
