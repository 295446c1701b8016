"""`summarise`: a rank's last movement is the newest of its step lines and its signals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from analysis.signals.model import Signal
from analysis.signals.summary import RankSignals, summarise

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def test_a_rank_that_only_moved_has_its_newest_step_time_and_nothing_else():
    facts = summarise([], steps=[(3, T0), (3, T0 + timedelta(seconds=5)), (9, T0)], world=8)
    assert facts.by_rank == {3: RankSignals(rank=3, last_moved_at=T0 + timedelta(seconds=5))}


def test_step_lines_and_signals_together_give_the_newest_and_a_tie_keeps_the_step_lines_time():
    later = Signal("timeout", rank=1, node="n1", at=T0 + timedelta(seconds=9), text="t")
    facts = summarise([later], steps=[(1, T0)], world=4)
    assert facts.by_rank[1].last_moved_at == T0 + timedelta(seconds=9)
    assert facts.by_rank[1].failures == (later,)
    same_instant = T0.astimezone(timezone(timedelta(hours=1)))
    tie = Signal("timeout", rank=2, node="n1", at=same_instant, text="t")
    moved = summarise([tie], steps=[(2, T0)], world=4).by_rank[2].last_moved_at
    assert moved == T0 and moved.tzinfo is UTC


def test_by_rank_get_answers_as_its_items_do():
    failed = Signal("timeout", rank=1, node="n1", at=T0, text="t")
    by_rank = summarise([failed], steps=[(2, T0)], world=4).by_rank
    assert by_rank.get(1).failures == (failed,)
    assert by_rank.get(2) == RankSignals(rank=2, last_moved_at=T0) == by_rank[2]
    assert by_rank.get(3) is None and by_rank.get(3, "none") == "none" and 3 not in by_rank


def test_the_first_failure_is_the_earliest_stamped_the_first_read_of_equals_else_the_first():
    unstamped = Signal("exception", rank=1, node="n1", text="no time")
    late = Signal("timeout", rank=1, node="n1", at=T0 + timedelta(seconds=3), text="late")
    early = Signal("timeout", rank=1, node="n1", at=T0, text="early")
    same = Signal("killed", rank=1, node="n1", at=T0, text="same instant, read after")
    alone = Signal("exception", rank=2, node="n1", text="alone")
    by_rank = summarise([unstamped, late, early, same, alone], world=4).by_rank
    assert by_rank[1].first_failure is early
    assert by_rank[1].failures == (unstamped, late, early, same)
    assert by_rank[2].first_failure is alone


def test_a_rank_keeps_its_first_and_its_latest_failures_in_reading_order():
    from analysis.signals.summary import MAX_FAILURES

    many = [Signal("timeout", rank=1, node="n1", text=f"t{i}", peer=i % 3) for i in range(40)]
    found = summarise(many, world=4).by_rank[1]
    half = MAX_FAILURES // 2
    assert found.failures == (*many[:half], *many[-half:])
    assert found.peers == (0, 2) and found.progress == ()
    assert summarise(many[:5], world=4).by_rank[1].failures == tuple(many[:5])


def test_step_lines_of_ranks_once_each_or_past_the_world_give_each_rank_its_time():
    once = summarise([], steps=[(0, T0), (2, T0 + timedelta(seconds=1))], world=4).by_rank
    assert dict(once) == {0: RankSignals(0, T0), 2: RankSignals(2, T0 + timedelta(seconds=1))}
    beyond = summarise([], steps=[(0, T0), (4, T0), (-1, T0)], world=4).by_rank
    assert list(beyond) == [0]
    anyworld = summarise([], steps=[(7, T0)]).by_rank
    assert list(anyworld) == [7]
