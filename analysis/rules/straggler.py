"""A straggler: the job moves, and one rank (or a few) is measured slower than the rest.

Measured means a spread, never a moment: the share of py-spy's sampling window each rank
spent waiting in collectives (the straggler is the one that rarely waits, the others wait
for it), per-rank step times that differ, or a straggler detector naming the same rank more
than once. A rank caught outside the collective in a dump, or in two, is a moment: a healthy
job's rank 0 is caught logging or saving as often as not.
"""

from __future__ import annotations

from analysis import quotes
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.verdict import Quote, QuoteKind, ranks_text

# A straggler is a few slow ranks; when half the job is "slow", the job is just slow.
STRAGGLER_SHARE = 8
STRAGGLER_FACTOR = 1.5
SLOW_REPORTS_NEEDED = 2
# The sampling window: a rank needs this many samples to count, the others must wait this
# share of their time, and the straggler at most half of theirs and this much less.
MIN_SAMPLES = 20
OTHERS_WAIT = 0.3
WAIT_GAP = 0.2


def straggler(facts: Facts) -> Finding | None:
    """Proof of progress and a measured slow rank (or a few)."""
    if not facts.progress.progressing:
        return None
    slow, how = _stragglers(facts)
    if not slow or len(slow) > max(1, facts.world // STRAGGLER_SHARE):
        return None
    return _straggler(facts, slow, how)


def _stragglers(facts: Facts) -> tuple[list[int], str]:
    sampled = _rarely_waiting(facts)
    if sampled:
        return sampled, "samples"
    named = [r for r, (count, _) in facts.slow_reports.items() if count >= SLOW_REPORTS_NEEDED]
    if named:
        return sorted(named), "detector"
    times = sorted((s.step_time, r) for r, s in facts.ranks.items() if s.step_time)
    if len(times) < 3:
        return [], ""
    median = times[len(times) // 2][0]
    slow = sorted(r for t, r in times if median > 0 and t > STRAGGLER_FACTOR * median)
    return slow, "step_time"


def typical_wait(facts: Facts) -> float | None:
    """The median share of the window the sampled ranks spent waiting in collectives (of
    two ranks, the larger: the one that waits is the typical one)."""
    shares = sorted(
        s.window.wait_share
        for s in facts.ranks.values()
        if s.window is not None and s.window.samples >= MIN_SAMPLES
    )
    if len(shares) < 2:
        return None
    return shares[-1] if len(shares) == 2 else shares[len(shares) // 2]


def _rarely_waiting(facts: Facts) -> list[int]:
    typical = typical_wait(facts)
    if typical is None or typical < OTHERS_WAIT:
        return []
    return sorted(
        r
        for r, s in facts.ranks.items()
        if s.window is not None
        and s.window.samples >= MIN_SAMPLES
        and s.window.wait_share <= typical / 2
        and typical - s.window.wait_share >= WAIT_GAP
    )


def _measured(facts: Facts, rank: int, how: str, typical: float | None) -> list[Quote]:
    state = facts.ranks.get(rank)
    node = facts.rank_node.get(rank)
    if how == "samples" and state is not None and state.window is not None:
        window = state.window
        text = (
            f"rank {rank}: {window.waiting} of {window.samples} samples waiting in collectives "
            f"({window.wait_share:.0%}; the others {typical:.0%}), most often in "
            f"{window.busiest or 'its own code'}"
        )
        return [Quote(QuoteKind.SAMPLES, node, rank, text)]
    if how == "detector":
        lines = facts.slow_reports.get(rank, (0, ()))[1][:2]
        return [Quote(QuoteKind.SLOW_RANK, node, rank, line) for line in lines]
    if state is not None and state.step_time:
        return [
            Quote(QuoteKind.STEP_TIME, node, rank, f"rank {rank}: {state.step_time:g} s per step")
        ]
    return []


def _straggler(facts: Facts, slow: list[int], how: str) -> Finding:
    typical = typical_wait(facts)
    evidence = [e for rank in slow[:5] for e in _measured(facts, rank, how, typical)]
    evidence += quotes.stacks(facts, slow)
    evidence.append(quotes.progress(facts.progress))
    state = facts.ranks.get(slow[0])
    busy = state.window.busiest if state is not None and state.window is not None else ""
    frame = busy or (state.innermost_frame if state else "") or "a slow step"
    nodes = sorted({facts.rank_node[r] for r in slow if r in facts.rank_node})
    waiting = f"; the others wait for it {typical:.0%} of the time" if typical else ""
    where = f" Look at {', '.join(nodes[:5])}:" if nodes else " Look at its node:"
    return Finding(
        "straggler",
        (0.85 if how == "samples" else 0.75) if facts.progress.method == "two_snapshots" else 0.6,
        f"The job still progresses ({facts.progress.describe()}) but {ranks_text(slow)} "
        f"{'is' if len(slow) == 1 else 'are'} slow: busy in {frame}{waiting}.{where} data, "
        "CPU, disk, throttling.",
        suspects=tuple(slow),
        evidence=tuple(evidence),
        check=(
            f"py-spy top --pid on {ranks_text(slow[:3])}'s process for a minute: the time goes "
            "to the same function (data loading, I/O, CPU contention); the other ranks spend "
            "it in collectives."
        ),
        rule="straggler",
    )
