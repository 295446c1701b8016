"""`summarise`: a rank's last movement is the newest of its step lines and its signals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise

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


def _mixed_signals(seed: int) -> list[Signal]:
    """Signals of every shape a tally reads: stamped or not, progress, checkpoints, failures
    naming peers, NCCL lines that only name their rank, node failures, ranks past the world."""
    import random

    chance = random.Random(seed)
    kinds = ("timeout", "nccl_config", "progress", "checkpoint", "exception", "connection")
    signals = []
    for i in range(400):
        kind = chance.choice(kinds)
        rank = chance.choice([None, -1, 9, *range(6)])
        at = T0 + timedelta(seconds=chance.randrange(40)) if chance.random() < 0.7 else None
        signals.append(
            Signal(
                kind, rank, chance.choice(["n1", "n2", ""]), f"line {i}", at=at,
                peer=chance.choice([None, 1, 2, 3]), step=chance.randrange(50),
                line_no=i,
            )
        )  # fmt: skip
    return signals


def _one_walk(signals, world, steps):
    """The sum as it was made before parts: one walk over every signal in order."""
    from analysis.signals import summary

    moved = summary._moved(steps, world)
    ranks, nodes = {}, {}
    for signal in signals:
        rank = signal.rank
        if rank is not None and (world is None or 0 <= rank < world):
            tally = ranks.setdefault(rank, summary._RankTally())
            if signal.at is not None or signal.kind in summary._TALLIED:
                tally.add(signal)
        elif rank is None and signal.node and signal.kind in summary.FAILURE_KINDS:
            kept = nodes.setdefault(signal.node, [])
            if len(kept) < summary.MAX_NODE_SIGNALS:
                kept.append(signal)
    signalled = {}
    for rank in sorted(ranks):
        tally, at = ranks[rank], moved.get(rank)
        if at is not None and (tally.moved is None or at >= tally.moved):
            tally.moved = at
        signalled[rank] = tally.done(rank)
    by_node = {node: tuple(kept) for node, kept in sorted(nodes.items())}
    return summary.SignalFacts(summary._ByRank(signalled, moved), by_node, signalled=signalled)


def test_parts_summed_apart_then_together_give_the_walk_of_all_their_signals():
    """The merge sums a joined node's signals in its join (`signal_part`) and adds the parts:
    the same per-rank and per-node facts, in the same orders, as one walk over every signal
    in order, a rank two parts name included."""
    import random

    from analysis.signals import summary

    steps = [(r, T0 + timedelta(seconds=s)) for r, s in ((0, 50), (1, 3), (4, 20), (7, 1))]
    for seed in range(40):
        signals = _mixed_signals(seed)
        chance = random.Random(seed)
        cuts = sorted(chance.sample(range(1, len(signals)), chance.randrange(0, 12)))
        bounds = [0, *cuts, len(signals)]
        parts = [summary.signal_part(signals[a:b]) for a, b in pairwise(bounds)]
        for world in (None, 6, 9):
            whole = _one_walk(signals, world, steps)
            assert summarise(signals, world=world, steps=steps) == whole
            summed = summary.summarise_parts(parts, world=world, steps=steps)
            assert summed == whole
            assert list(summed.signalled) == list(whole.signalled)
            assert list(summed.by_rank) == list(whole.by_rank)
            assert dict(summed.by_rank) == dict(whole.by_rank)
            assert list(summed.by_node) == list(whole.by_node)


def test_a_node_keeps_its_first_failures_across_parts():
    from analysis.signals import summary

    lines = [Signal("exception", None, "n1", f"e{i}") for i in range(100)]
    parts = [summary.signal_part(lines[:50]), summary.signal_part(lines[50:])]
    kept = summary.summarise_parts(parts).by_node["n1"]
    assert kept == tuple(lines[: summary.MAX_NODE_SIGNALS])
