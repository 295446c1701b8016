"""Is the job moving? Proven by two looks (steps that advanced), or by the age of its last
step against its own pace; disproven by silence of many step times; otherwise undecided.

"healthy" rests on this proof (analysis/rules/progress.py), and a stuck verdict on one look is
damped while nothing disproves motion (analysis/findings.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

from analysis.records import as_opt_float, as_opt_int, as_str
from analysis.snapshot_parse import WARMUP_STEPS, ParsedSnapshot
from analysis.stacks import compact_ranks

# "Healthy" needs a step within this many median step times (and at least the floor, since a
# snapshot takes a moment and logs are flushed late).
HEALTHY_STEP_MULTIPLE = 5
HEALTHY_FLOOR_S = 5.0


@dataclass(frozen=True)
class Progress:
    """Is the job moving? Proven by two snapshots, or by the age of its last step."""

    method: str  # "two_snapshots" | "last_step_age" | "none"
    progressing: bool | None  # None: nothing proves it either way
    age_s: float | None = None
    threshold_s: float | None = None
    step_time_s: float | None = None
    advanced_ranks: str = ""
    step_before: int | None = None
    step_after: int | None = None
    stacks_changed: str = ""
    note: str = ""  # why progress is proven, disproven or neither

    def to_json(self) -> dict[str, Any]:
        # Every field, always (null where the method does not measure it): one shape to read.
        return {
            "method": self.method,
            "progressing": self.progressing,
            "age_s": self.age_s,
            "threshold_s": self.threshold_s,
            "step_time_s": self.step_time_s,
            "advanced_ranks": self.advanced_ranks,
            "stacks_changed": self.stacks_changed,
            "step_before": self.step_before,
            "step_after": self.step_after,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Progress:
        """As `to_json` stored it (before schema 3, only the fields its method measured)."""
        get = data.get
        progressing = get("progressing")
        return cls(
            method=as_str(get("method"), "none") or "none",
            progressing=progressing if isinstance(progressing, bool) else None,
            age_s=as_opt_float(get("age_s")),
            threshold_s=as_opt_float(get("threshold_s")),
            step_time_s=as_opt_float(get("step_time_s")),
            advanced_ranks=as_str(get("advanced_ranks")),
            step_before=as_opt_int(get("step_before")),
            step_after=as_opt_int(get("step_after")),
            stacks_changed=as_str(get("stacks_changed")),
            note=as_str(get("note")),
        )

    def describe(self) -> str:
        if self.method == "two_snapshots" and self.step_before is not None:
            return f"step {self.step_before} -> {self.step_after} between snapshots"
        if self.method == "last_step_age":
            return f"last step {self.age_s} s ago"
        return "progress unknown"


# Read of 32,000 states by C (map, filter), not a generator's frame each.
_STEP_TIME, _LOG_PERIOD = attrgetter("step_time"), attrgetter("log_period")


class RankTimes(NamedTuple):
    """What progress reads of every rank, gathered by the facts' one walk of the ranks
    (`facts._RankWalk`) instead of a walk of its own each."""

    step_times: list[float | None]  # every rank's step time, in rank order
    log_periods: list[float | None]  # every rank's log period, in rank order
    node_latest: dict[str, datetime]  # node -> its ranks' latest step line's time


def job_step_time(snap: ParsedSnapshot, ranks: RankTimes | None = None) -> float | None:
    """The job's own median step time, warm-up steps excluded; None when unknown."""
    steps = ranks.step_times if ranks is not None else map(_STEP_TIME, snap.ranks.values())
    times = sorted(filter(None, steps))  # the known, non-zero
    if not times:
        # A straggler detector's round trip is the step time as the framework measures it.
        times = sorted(took for _, took in snap.heartbeats if took)
    return times[len(times) // 2] if times else None


def job_log_period(snap: ParsedSnapshot, ranks: RankTimes | None = None) -> float | None:
    """How often the job writes a step line (every step, or every N): the silence to expect
    between two lines. Falls back to the step time."""
    found = ranks.log_periods if ranks is not None else map(_LOG_PERIOD, snap.ranks.values())
    periods = sorted(filter(None, found))
    if periods:
        return max(periods[len(periods) // 2], job_step_time(snap, ranks) or 0.0)
    return job_step_time(snap, ranks)


def progress_of(
    snap: ParsedSnapshot, prev: ParsedSnapshot | None, ranks: RankTimes | None = None
) -> Progress:
    """`ranks`: what the facts' walk of the ranks read of them, else read here."""
    if prev is not None:
        return _two_snapshots(snap, prev)
    ages = _step_ages(snap, ranks.node_latest if ranks is not None else None)
    if not ages:
        return Progress("none", None, note="no timed step line")
    age = round(min(ages), 1)
    pace = job_log_period(snap, ranks)
    if pace is None:
        # One step and silence proves nothing: no step time to compare the silence with.
        return Progress("last_step_age", None, age_s=age, note="no step time to compare with")
    moving_within = HEALTHY_STEP_MULTIPLE * pace
    stopped_after = max(moving_within, HEALTHY_FLOOR_S)
    warm = _past_warmup(snap)
    if min(ages) > stopped_after:
        progressing, note = False, f"no step for over {HEALTHY_STEP_MULTIPLE} step times"
    elif not warm:
        progressing, note = None, "only warm-up steps so far: not yet proof of progress"
    elif min(ages) <= moving_within:
        progressing, note = True, f"a step within {HEALTHY_STEP_MULTIPLE} step times"
    else:
        # Older than a few step times, younger than the floor that allows for late logs:
        # neither proof of motion nor of a stop.
        progressing = None
        note = (
            f"no step for {age} s: over {HEALTHY_STEP_MULTIPLE} step times, under the "
            f"{HEALTHY_FLOOR_S:g} s allowed for late logs"
        )
    return Progress(
        "last_step_age",
        progressing,
        age_s=age,
        threshold_s=round(moving_within, 1),
        step_time_s=round(pace, 3),
        note=note,
    )


def _step_ages(snap: ParsedSnapshot, latest: dict[str, datetime] | None = None) -> list[float]:
    """Seconds since each node's latest step line, as its clock read it when the console
    came (the snapshot's time for ranks whose node gave none); heartbeats too. (A node's
    latest line is its ranks' youngest age: what is read of these is the youngest.)
    `latest`: node -> its latest step line's time, when the facts' walk read it."""
    if latest is None:
        latest = node_latest_steps(snap.ranks.values())
    ages = []
    for name, at in latest.items():
        node = snap.nodes.get(name)
        now = (node.collected_at if node else None) or snap.collected_at
        if now is not None:
            ages.append(max(0.0, (now - at).total_seconds()))
    if snap.collected_at is not None:
        ages += [max(0.0, (snap.collected_at - at).total_seconds()) for at, _ in snap.heartbeats]
    return ages


def node_latest_steps(states) -> dict[str, datetime]:
    """node -> the latest step line's time of its ranks (those with one)."""
    latest: dict[str, datetime] = {}
    for state in states:
        at = state.last_step_at
        if at is not None:
            seen = latest.get(state.node)
            if seen is None or at > seen:
                latest[state.node] = at
    return latest


def _past_warmup(snap: ParsedSnapshot) -> bool:
    """A step past the first few (compilation, caches), or a framework's periodic report."""
    if snap.heartbeats:
        return True
    return any(s.last_step is not None and s.last_step > WARMUP_STEPS for s in snap.ranks.values())


def _two_snapshots(snap: ParsedSnapshot, prev: ParsedSnapshot) -> Progress:
    now_steps = {r: s.last_step for r, s in snap.ranks.items() if s.last_step is not None}
    before = {r: s.last_step for r, s in prev.ranks.items() if s.last_step is not None}
    common = sorted(set(now_steps) & set(before))
    advanced = [r for r in common if now_steps[r] > before[r]]
    moved = [
        r
        for r, s in snap.ranks.items()
        if r in prev.ranks
        and s.stack_signature
        and prev.ranks[r].stack_signature
        and s.stack_signature != prev.ranks[r].stack_signature
    ]
    # Stacks that moved without a finished step: alive but slow (a long step, a checkpoint),
    # or dead? Undecided rather than "stuck".
    progressing = True if advanced else (None if moved else False)
    note = (
        "steps advanced between the looks"
        if advanced
        else "stacks changed, no step completed"
        if moved
        else "nothing moved between the looks"
    )
    return Progress(
        "two_snapshots",
        progressing,
        note=note,
        advanced_ranks=compact_ranks(advanced),
        step_before=max(before[r] for r in common) if common else None,
        step_after=max(now_steps[r] for r in common) if common else None,
        stacks_changed=compact_ranks(moved),
    )
