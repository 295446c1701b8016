"""The watch's judgement, pure: from what one period read (log tails of the step nodes, the
training processes of every node, pushed heartbeats) and what the watch knew before, the job's
progress (last global step, when, learned normal step time) and its state.

Steps come from the log parser the diagnosis uses (analysis.parsers.logs.parse_log).
A hang is a last global step older than the threshold: step time x multiplier, never under the
floor, plus an allowance while a checkpoint is being written. A training process that
disappeared while others still run is a rank gone. A job that still steps, but several times
slower than it learned, is slow: reported, never raised. A job that never completes a first
step is stuck in init once its training processes are older than the init threshold (per
cluster, 10 minutes by default), or older than the floor when the stacks read while it waits
put every rank inside init_process_group / rendezvous or its first collective.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analysis.parsers.logs import StepRecord, parse_log, parse_timestamp
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.stacks import frame_kind, relevant_frame

from .reading import NodeReading

MAX_STEP_TIMES = 64  # the learned step time is the median of this many recent normal steps
MIN_STEP_TIMES = 3
RECENT_STEPS = 5
SLOW_FACTOR = 2.0  # recent steps this many times the learned one: slow
UNLEARNED_THRESHOLD_S = 900.0  # before any step time is known, a step may take this long
_LINE_CAP = 400  # characters of a line looked at for checkpoint words

# Words of the lines frameworks write around a checkpoint save (lowercased): Megatron
# ("saving checkpoint at iteration N to ...", "successfully saved checkpoint from iteration"),
# Hugging Face ("Saving model checkpoint to ..."), DeepSpeed ("Checkpoint global_step100 is
# about to be saved!", "... is ready now!").
_CHECKPOINT_START = ("saving checkpoint", "saving model checkpoint", "is about to be saved")
_CHECKPOINT_END = ("saved checkpoint", "checkpoint saved", "is ready now")


@dataclass(frozen=True)
class Settings:
    multiplier: float = 5.0
    floor_s: float = 120.0
    checkpoint_allowance_s: float = 900.0
    init_threshold_s: float = 600.0  # no first step this long after the processes started


@dataclass(frozen=True)
class LogProgress:
    step: int | None = None  # the last step every rank seen in the tails completed
    at: datetime | None = None  # when the last of them completed it
    durations: tuple[float, ...] = ()  # seconds per step of the steps after `after_step`
    recent_s: float | None = None  # median of the tails' last few steps
    checkpoint: bool = False  # a checkpoint is being written after the last step
    checkpoint_since: datetime | None = None  # when it began, where the lines tell
    ranks: int = 0


def log_progress(logs: dict[str, str], *, after_step: int | None) -> LogProgress:
    """The job's progress as the log tails tell it."""
    by_rank: dict[object, list[StepRecord]] = {}
    checkpoint: datetime | None = None
    checkpoint_open = False
    for path, text in sorted(logs.items()):
        facts = parse_log(path, text)
        for record in facts.steps:
            key = record.rank if record.rank is not None else path
            by_rank.setdefault(key, []).append(record)
        last = facts.steps[-1] if facts.steps else None
        since = _checkpoint_since(text, last.line if last else None)
        if since is not None:
            checkpoint_open = True
            if not isinstance(since, datetime):  # the line has no time: after the last step
                since = last.at if last else None
            if since is not None and (checkpoint is None or since < checkpoint):
                checkpoint = since
    if not by_rank:
        return LogProgress(checkpoint=checkpoint_open, checkpoint_since=checkpoint)
    last = {key: max(records, key=lambda r: r.step) for key, records in by_rank.items()}
    step = min(r.step for r in last.values())
    stamps = [r.at for r in last.values() if r.step == step and r.at is not None]
    series = max(by_rank.values(), key=len)
    durations = _durations(series)
    new = [d for s, d in durations if after_step is None or s > after_step]
    recent = [d for _, d in durations[-RECENT_STEPS:]]
    return LogProgress(
        step=step,
        at=max(stamps) if stamps else None,
        durations=tuple(new[-MAX_STEP_TIMES:]),
        recent_s=statistics.median(recent) if recent else None,
        checkpoint=checkpoint_open,
        checkpoint_since=checkpoint if checkpoint_open else None,
        ranks=len(by_rank),
    )


def _durations(records: list[StepRecord]) -> list[tuple[int, float]]:
    """(step, seconds) for one rank's steps: the logged step time, or the time since the
    previous step line divided by the steps between them."""
    out: list[tuple[int, float]] = []
    ordered = sorted(records, key=lambda r: r.step)
    previous = None
    for record in ordered:
        if record.step_time is not None and record.step_time >= 0:
            out.append((record.step, record.step_time))
        elif previous is not None and previous.at and record.at and record.step > previous.step:
            seconds = (record.at - previous.at).total_seconds() / (record.step - previous.step)
            if seconds >= 0:
                out.append((record.step, seconds))
        previous = record
    return out


def _checkpoint_since(text: str, last_step_line: str | None) -> datetime | bool | None:
    """When the checkpoint being written started (True when the line has no time), or None
    when no save is under way after the last step line."""
    after = text.rfind(last_step_line) + len(last_step_line) if last_step_line else 0
    if "heckpoint" not in text[after:] and "is about to be saved" not in text[after:]:
        return None  # the usual case, found without looking at a single line
    started: datetime | bool | None = None
    for line in text[after:].splitlines():
        lowered = line[:_LINE_CAP].lower()
        if any(word in lowered for word in _CHECKPOINT_END):
            started = None
        elif any(word in lowered for word in _CHECKPOINT_START):
            started = parse_timestamp(line) or True
    return started


@dataclass(frozen=True)
class HeartbeatView:
    rank: int
    step: int
    at: datetime
    checkpoint: bool = False
    step_time_s: float | None = None


@dataclass(frozen=True)
class Before:
    """What the watch knew before this period."""

    last_step: int | None = None
    last_step_at: datetime | None = None
    step_times: tuple[float, ...] = ()
    pids: dict[str, tuple[int, ...]] = field(default_factory=dict)  # node -> live pids


@dataclass(frozen=True)
class Judgement:
    state: str  # a watch.models.WatchState value
    reason: str
    last_step: int | None
    last_step_at: datetime | None
    step_times: tuple[float, ...]
    step_time_s: float | None
    recent_step_time_s: float | None
    threshold_s: float
    checkpoint_since: datetime | None
    pids: dict[str, tuple[int, ...]]
    raise_reason: str | None = None  # "stalled", "gone" or "init": open (or join) an incident
    gone: dict[str, tuple[int, ...]] = field(default_factory=dict)  # node -> pids that left
    step_nodes: tuple[str, ...] = ()  # nodes whose tails carried step lines this period

    @property
    def progressed(self) -> bool:
        return self.state in ("ok", "slow")


def learned_step_time(step_times: Sequence[float]) -> float | None:
    if len(step_times) < MIN_STEP_TIMES:
        return None
    return statistics.median(step_times)


def threshold(settings: Settings, step_time_s: float | None, checkpoint: bool) -> float:
    if step_time_s is None:
        base = max(settings.floor_s, UNLEARNED_THRESHOLD_S)
    else:
        base = max(settings.floor_s, settings.multiplier * step_time_s)
    return base + (settings.checkpoint_allowance_s if checkpoint else 0.0)


def learn(step_times: Sequence[float], new: Iterable[float]) -> tuple[float, ...]:
    """Add the new steps' durations, leaving out the slow ones (a straggler's steps must not
    become the job's normal)."""
    kept = list(step_times)
    for seconds in new:
        normal = learned_step_time(kept)
        if normal is None or seconds <= SLOW_FACTOR * normal:
            kept.append(seconds)
    return tuple(kept[-MAX_STEP_TIMES:])


def judge(
    readings: Sequence[NodeReading],
    before: Before,
    settings: Settings,
    now: datetime,
    heartbeats: Sequence[HeartbeatView] = (),
) -> Judgement:
    """The state of the job after one period."""
    logs = {f"{r.node}:{path}": text for r in readings if r.ok for path, text in r.logs.items()}
    progress = log_progress(logs, after_step=before.last_step)
    step_nodes = tuple(
        sorted({r.node for r in readings if r.ok and log_progress(r.logs, after_step=None).ranks})
    ) if progress.ranks else ()  # fmt: skip
    step, at, new_durations, recent = _combine(progress, heartbeats, now)
    last_step, last_step_at = _advance(before, step, at, now)
    step_times = learn(before.step_times, new_durations if step is not None else ())
    if last_step is not None and before.last_step is not None and last_step < before.last_step:
        step_times = learn((), new_durations)  # a new run of the job: learn it again
    normal = learned_step_time(step_times)
    writing, checkpoint = _checkpoint(progress, heartbeats, now)
    limit = threshold(settings, normal, writing)
    pids = {r.node: tuple(r.live_pids) for r in readings if r.ok}
    gone = _gone(before.pids, pids)
    # No step seen this period and a node did not answer: perhaps the step node. A blip must
    # not page, a dead node must: the stall then needs twice the threshold.
    blind = step is None and any(not r.ok for r in readings)
    state, reason, raise_reason = _state(
        readings, heartbeats, gone, last_step, last_step_at, limit * (2 if blind else 1),
        normal, recent, now, pids,
    )  # fmt: skip
    if state == "waiting":
        state, reason, raise_reason, init_limit = init_state(readings, settings)
        if raise_reason:
            limit = init_limit
    merged = {**{n: p for n, p in before.pids.items() if n not in pids}, **pids}
    return Judgement(
        state=state,
        reason=reason,
        last_step=last_step,
        last_step_at=last_step_at,
        step_times=step_times,
        step_time_s=normal,
        recent_step_time_s=recent,
        threshold_s=limit,
        checkpoint_since=checkpoint,
        pids=merged,
        raise_reason=raise_reason,
        gone=gone,
        step_nodes=step_nodes,
    )


def _combine(
    progress: LogProgress, heartbeats: Sequence[HeartbeatView], now: datetime
) -> tuple[int | None, datetime | None, tuple[float, ...], float | None]:
    """The freshest of the two sources: the log tails and the pushed heartbeats."""
    step, at, durations, recent = progress.step, progress.at, progress.durations, progress.recent_s
    if heartbeats:
        hb_step = min(h.step for h in heartbeats)
        hb_at = max(h.at for h in heartbeats if h.step == hb_step)
        if step is None or (at is not None and hb_at > at and hb_step >= step):
            step, at = hb_step, hb_at
        times = [h.step_time_s for h in heartbeats if h.step_time_s is not None]
        if times and recent is None:
            recent = statistics.median(times)
            durations = (*durations, recent)
    if at is not None and at > now:
        at = now  # a node clock ahead of ours must not postpone a raise
    return step, at, durations, recent


def _advance(
    before: Before, step: int | None, at: datetime | None, now: datetime
) -> tuple[int | None, datetime | None]:
    if step is None:
        return before.last_step, before.last_step_at
    if before.last_step is not None and step == before.last_step and before.last_step_at:
        return step, before.last_step_at
    return step, at or now


def _checkpoint(
    progress: LogProgress, heartbeats: Sequence[HeartbeatView], now: datetime
) -> tuple[bool, datetime | None]:
    """Is a checkpoint being written (log lines or a heartbeat's flag), and since when."""
    flagged = [h.at for h in heartbeats if h.checkpoint]
    if not progress.checkpoint and not flagged:
        return False, None
    known = [*([progress.checkpoint_since] if progress.checkpoint_since else []), *flagged]
    return True, min(known) if known else now


def _gone(before: dict[str, tuple[int, ...]], now: dict[str, tuple[int, ...]]) -> dict:
    """Per node, the training processes of the last period that are gone, unless as many
    new ones replaced them (a restart is not a departure)."""
    gone = {}
    for node, pids in now.items():
        previous = before.get(node, ())
        left = tuple(sorted(set(previous) - set(pids)))
        if left and len(pids) < len(previous):
            gone[node] = left
    return gone


def _state(
    readings, heartbeats, gone, last_step, last_step_at, limit, normal, recent, now, pids
) -> tuple[str, str, str | None]:
    answered = [r for r in readings if r.ok]
    if not answered and not heartbeats:
        failed = ", ".join(f"{r.node}: {r.error}" for r in readings[:3])
        return "unreachable", f"no node answered ({failed})"[:500], None
    alive = sum(len(p) for p in pids.values())
    if answered and alive == 0 and not _fresh(heartbeats, last_step_at, limit, now):
        return "idle", "no training process runs on any node that answered", None
    if gone:
        where = "; ".join(f"{node}: pid {', '.join(map(str, p))}" for node, p in gone.items())
        return "gone", f"training processes disappeared ({where})"[:500], "gone"
    if last_step is None or last_step_at is None:
        return "waiting", "no step line and no heartbeat yet", None
    age = (now - last_step_at).total_seconds()
    if age > limit:
        return (
            "stalled",
            f"step {last_step} is {age:.0f} s old (threshold {limit:.0f} s)",
            "stalled",
        )
    if any(not r.ok for r in readings):
        failed = ", ".join(r.node for r in readings if not r.ok)[:200]
        return "unreachable", f"step {last_step}, {age:.0f} s ago; no answer from {failed}", None
    if normal and recent and recent > SLOW_FACTOR * normal:
        return (
            "slow",
            f"steps take {recent:.2f} s, {recent / normal:.1f}x the learned {normal:.2f} s",
            None,
        )
    return "ok", f"step {last_step}, {age:.0f} s ago", None


INIT_KINDS = ("init", "collective")  # where a rank stands before its first step completes


def init_stance(readings: Sequence[NodeReading]) -> str | None:
    """From the stacks read while the job has no first step: "init" when every rank (every
    live process no other one is the parent of: launchers aside) is inside process-group
    set-up, rendezvous or a collective; "past" when one runs elsewhere; None when the stacks
    do not tell (not read, a node silent, a rank without a readable stack)."""
    ranks, past = 0, False
    for r in readings:
        if not r.ok:
            return None
        live = r.live_pids
        if not live:
            continue
        if not r.parents:
            return None  # stacks not read on this node
        launchers = {r.parents.get(pid) for pid in live}
        for pid in live:
            if pid in launchers:
                continue
            kind = _stack_kind(r.stacks.get(pid))
            if kind is None:
                return None
            ranks += 1
            past = past or kind not in INIT_KINDS
    if not ranks:
        return None
    return "past" if past else "init"


def _stack_kind(dump: str | None) -> str | None:
    if not dump:
        return None
    threads, _ = parse_pyspy(dump)
    thread = main_thread(threads)
    if thread is None or not thread.frames:
        return None
    return frame_kind(relevant_frame(thread.frames))


def init_state(
    readings: Sequence[NodeReading], settings: Settings
) -> tuple[str, str, str | None, float]:
    """A job with no step yet: still starting ("waiting"), or stuck in init (raised); and the
    init threshold that applies."""
    ages = [p.elapsed_s for r in readings if r.ok for p in r.processes if p.alive]
    if not ages:
        return "waiting", "no step line and no heartbeat yet", None, settings.init_threshold_s
    age = min(ages)  # the youngest process: every one has been starting at least this long
    stance = init_stance(readings)
    if stance == "past":
        return (
            "waiting",
            f"no step line yet, and the ranks run past init for {age} s: are the cluster's "
            "log globs right, or does the job send heartbeats?",
            None,
            settings.init_threshold_s,
        )
    limit = settings.floor_s if stance == "init" else settings.init_threshold_s
    if age <= limit:
        return "waiting", f"no step yet; the training processes started {age} s ago", None, limit
    where = (
        "every rank is inside init_process_group / rendezvous or its first collective"
        if stance == "init"
        else "no first step completed"
    )
    return (
        "init",
        f"{where}: the training processes started {age} s ago (init threshold {limit:.0f} s)",
        "init",
        limit,
    )


def _fresh(heartbeats, last_step_at, limit, now) -> bool:
    if not heartbeats or last_step_at is None:
        return False
    return now - max(h.at for h in heartbeats) < timedelta(seconds=limit)
