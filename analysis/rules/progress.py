"""Proof of progress: healthy, or one rank slower than the rest; and a snapshot with nothing."""

from __future__ import annotations

from analysis import quotes
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.verdict import Evidence, ranks_text

# A straggler is a few slow ranks; when half the job is "slow", the job is just slow.
STRAGGLER_SHARE = 8
STRAGGLER_FACTOR = 1.5
SLOW_REPORTS_NEEDED = 2


def no_evidence(facts: Facts) -> Finding | None:
    if facts.ranks or facts.snap.logs or facts.missing:
        return None
    return Finding(
        "unknown",
        0.0,
        "No rank, stack or log was found in this snapshot.",
        check="Check the cluster's process pattern and log globs: the probe found no training "
        "process and no log on any node.",
        rule="none",
    )


def moving(facts: Facts) -> Finding | None:
    """Proof of progress: healthy, unless a stuck signal says otherwise (the combiner's call)."""
    if not facts.progress.progressing:
        return None
    real = [d for d in facts.env_diffs if not d["expected_per_rank"]]
    note = ""
    evidence = [quotes.progress(facts.progress)]
    if real:
        note = f" Environment differs across ranks ({real[0]['name']}): fix it before it bites."
        evidence += [Evidence("env_diff", None, None, quotes.diff_text(d)) for d in real[:3]]
    two = facts.progress.method == "two_snapshots"
    return Finding(
        "healthy",
        0.85 if two else 0.6,
        f"Training progresses ({facts.progress.describe()}); no rank is stuck.{note}",
        evidence=tuple(evidence),
        check=(
            "Nothing to confirm: the steps advanced between the two looks."
            if two
            else "A second snapshot in a minute: the last step should have advanced again."
        ),
        rule="moving",
    )


def straggler(facts: Facts) -> Finding | None:
    """Proof of progress and a measured slow rank (or a few)."""
    if not facts.progress.progressing:
        return None
    slow = _stragglers(facts)
    if not slow or len(slow) > max(1, facts.world // STRAGGLER_SHARE):
        return None
    return _straggler(facts, slow)


def _outside_every_look(facts: Facts) -> list[int]:
    """The ranks outside any collective in every snapshot, when in one of them the others
    waited in a collective. A straggler is slow every time we look, and one snapshot may
    catch a fast rank busy, or (on a loaded machine, py-spy taking its time) every rank in
    its data loading at once: that look then names no one, and does not clear anyone."""
    looks = [facts.ranks] + ([facts.prev.ranks] if facts.prev is not None else [])
    if not any(s.frame_kind == "collective" for ranks in looks for s in ranks.values()):
        return []
    outside = [{r for r, s in ranks.items() if s.frame_kind == "outside"} for ranks in looks]
    return sorted(set.intersection(*outside))


def _stragglers(facts: Facts) -> list[int]:
    outside = _outside_every_look(facts)
    if outside:
        return outside
    named = [r for r, (count, _) in facts.slow_reports.items() if count >= SLOW_REPORTS_NEEDED]
    if named:
        return sorted(named)
    times = sorted((s.step_time, r) for r, s in facts.ranks.items() if s.step_time)
    if len(times) < 3:
        return []
    median = times[len(times) // 2][0]
    return sorted(r for t, r in times if median > 0 and t > STRAGGLER_FACTOR * median)


def _straggler(facts: Facts, slow: list[int]) -> Finding:
    evidence = quotes.stacks(facts, slow)
    for rank in slow[:5]:
        lines = facts.slow_reports.get(rank, (0, ()))[1][:2]
        evidence += [Evidence("slow_rank", facts.rank_node.get(rank), rank, x) for x in lines]
        state = facts.ranks.get(rank)
        if state and state.step_time and not lines:
            text = f"rank {rank}: {state.step_time:g} s per step"
            evidence.append(Evidence("step_time", state.node, rank, text))
    evidence.append(quotes.progress(facts.progress))
    state = facts.ranks.get(slow[0])
    frame = (state.innermost_frame if state else "") or "a slow step"
    waiting = facts.in_collective
    nodes = sorted({facts.rank_node[r] for r in slow if r in facts.rank_node})
    who = f"; {ranks_text(waiting)} wait in collectives" if waiting else ""
    where = f" Look at {', '.join(nodes[:5])}:" if nodes else " Look at its node:"
    return Finding(
        "straggler",
        0.75 if facts.progress.method == "two_snapshots" else 0.55,
        f"The job still progresses ({facts.progress.describe()}) but {ranks_text(slow)} "
        f"{'is' if len(slow) == 1 else 'are'} slow: busy in {frame}{who}.{where} data, CPU, "
        "disk, throttling.",
        suspects=tuple(slow),
        evidence=tuple(evidence),
        check=f"py-spy record -d 5 --idle on {ranks_text(slow)} and one other rank: the slow "
        "rank spends its time outside the collectives, the others wait in them.",
        rule="straggler",
    )
