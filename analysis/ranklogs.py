"""A node's logs applied to its ranks: steps and their pace, launcher exits, watchdog lines,
NCCL's collectives, peers and configuration, slow-rank reports, and the progress the line
reader found in any form. Ranks are resolved through the node's LOCAL_RANK map and the
launchers' own maps (analysis/snapshot_parse.py hands them over).
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime
from itertools import pairwise

from analysis.parsers.logs import LineFact, LogFacts, parse_timestamp
from analysis.parsers.nccl import SlowFact
from analysis.rankmodel import (
    TERMINATED_BY_LAUNCHER,
    WARMUP_STEPS,
    JoinedLogs,
    ParsedNode,
    ParsedSnapshot,
    RankState,
    StepSummary,
)
from analysis.signals.model import Signal
from analysis.signals.place import add_signal_part, placed
from analysis.signals.progress import bar_step_time
from analysis.signals.summary import SignalPart, signal_part


def apply_log(
    node,
    log: LogFacts,
    local_to_global,
    facts: ParsedNode,
    parsed,
    problem,
    single_node: bool,
    steps: list[StepSummary] = (),
) -> None:
    """`steps`: the log's step lines as the map summarized them (its `log.steps` then empty).
    What a log does not hold is not walked; a log with nothing else than its summaries
    (`holds_more_than_steps`) needs only `apply_step_summaries`."""
    if log.local_to_global or log.host_ranks or log.exits:
        _learn_local_ranks(node, log, local_to_global, facts)

    def resolve(rank: int | None, local: int | None) -> int | None:
        if rank is not None:
            return rank
        if local is None:
            return None
        return local_to_global.get(local, local if single_node else None)

    if log.steps:
        _apply_steps(node, log, resolve, parsed.ranks, problem)
    if steps:
        apply_step_summaries(node, steps, parsed.ranks)
    if log.signals:
        parsed.raw_signals += placed(log.signals, resolve, log.pid_ranks)
    if log.exits or log.watchdog:
        _apply_exits(node, log, resolve, facts, parsed)
    if _has_sources(log):
        _apply_sources(node, log, resolve, parsed)


def join_logs(node: str, entries) -> JoinedLogs | None:
    """The node's logs (`nodemap.LogParse` each) in the merge's form, as `apply_log` and the
    merge's loop would add them one log at a time; None when a line names only a local rank
    (the merge resolves it through the node's LOCAL_RANK map), a log holds a launcher's exits
    (placed on the merge's ranks) or step lines the map did not summarize."""
    joined = JoinedLogs(
        logs=[], of_note=[], problems=[], world_sizes=[], mentioned=(), steps=[],
        step_lines=False, signals=SignalPart(), watchdog=[], collectives=[], peer_errors=[],
        nccl_config=[], slow_reports=[], rendezvous_errors=[], comm_inits=[], launched={},
        starts=[],
    )  # fmt: skip
    mentioned: list[int] = []
    signals: list[Signal] = []
    for entry in entries:
        log = entry.facts
        if log.exits or log.steps or not _ranks_explicit(log):
            return None
        joined.logs.append((node, log))
        if log.file_rank is not None and entry.written:
            mentioned.append(log.file_rank)
        if entry.master_pods:
            mentioned.append(0)
        joined.problems += [(log.path, text) for text in log.problems]
        if log.world_size:
            joined.world_sizes.append(log.world_size)
        if entry.steps:
            joined.steps += entry.steps
            joined.step_lines = True
        if holds_more_than_steps(log):
            joined.of_note.append((node, log))
            _join_of_note(node, log, joined, mentioned)
            if log.signals:
                signals += placed(log.signals, _explicit, log.pid_ranks)
        joined.launched.update(log.pid_ranks)
        if entry.start:
            joined.starts.append(entry.start)
    joined.mentioned = tuple(mentioned)
    joined.signals = signal_part(signals)
    return joined


def _ranks_explicit(log: LogFacts) -> bool:
    """Does every line the merge places name its rank, or name no rank at all? (Each kind
    looked at only when the log holds some: this runs for every log of a fleet.)"""
    for facts in (log.watchdog, log.errors, log.nccl_warn, log.desync, log.mismatches):
        if facts:
            for fact in facts:
                if fact.rank is None and fact.local_rank is not None:
                    return False
    for reported in (log.peer_errors, log.nccl_config):
        if reported:
            for rank, local, _ in reported:
                if rank is None and local is not None:
                    return False
    return all(signal.rank is not None or signal.local is None for signal in log.signals)


def _join_of_note(node: str, log: LogFacts, joined: JoinedLogs, mentioned: list[int]) -> None:
    """`apply_log` on a log whose lines name their ranks: the same lists in the same order."""
    if log.watchdog:
        _join_ranked(node, log.watchdog, joined.watchdog, mentioned)
    if log.collectives:
        _join_ranked(node, log.collectives, joined.collectives, mentioned)
    if log.peer_errors:
        _join_reported(node, log.peer_errors, joined.peer_errors, mentioned)
    if log.nccl_config:
        _join_reported(node, log.nccl_config, joined.nccl_config, mentioned)
    if log.slow_reports:
        joined.slow_reports += log.slow_reports
    if log.named_ranks:
        mentioned += log.named_ranks
    if log.rendezvous_errors:
        joined.rendezvous_errors += [(node, f.line) for f in log.rendezvous_errors[:3]]
    if log.comm_inits:
        joined.comm_inits += [(node, fact) for fact in log.comm_inits]
    for facts in (log.errors, log.nccl_warn, log.desync, log.mismatches):
        if facts:
            mentioned += [fact.rank for fact in facts if fact.rank is not None]


def _join_ranked(node: str, facts, target: list, mentioned: list[int]) -> None:
    for fact in facts:
        rank = fact.rank
        target.append((node, rank, fact))
        if rank is not None:
            mentioned.append(rank)


def _join_reported(node: str, facts, target: list, mentioned: list[int]) -> None:
    for rank, _, fact in facts:
        target.append((node, rank, fact))
        if rank is not None:
            mentioned.append(rank)


def apply_joined_logs(
    node: str,
    joined: JoinedLogs,
    parsed: ParsedSnapshot,
    world_sizes: list[int],
    problem,
    steps: list[StepSummary],
) -> dict[int, int]:
    """A node's joined logs on the snapshot: what the merge's loop and `apply_log` do for each
    of its logs, one extend a kind, and `steps` (its step summaries the merge still has to
    apply: all, or those of ranks beyond the node's own states). Returns the launchers'
    pid -> rank."""
    parsed.logs += joined.logs
    parsed.mentioned.update(joined.mentioned)
    for path, text in joined.problems:
        problem(node, path, text)
    world_sizes += joined.world_sizes
    parsed.logs_of_note += joined.of_note
    if joined.steps:
        parsed.step_lines = True
    if steps:
        apply_step_summaries(node, steps, parsed.ranks)
    add_signal_part(parsed, joined.signals)
    parsed.watchdog += joined.watchdog
    parsed.collectives += joined.collectives
    parsed.peer_errors += joined.peer_errors
    parsed.nccl_config += joined.nccl_config
    for fact in joined.slow_reports:
        _apply_slow_report(fact, parsed)
    parsed.rendezvous_errors += joined.rendezvous_errors
    parsed.comm_inits += joined.comm_inits
    parsed.log_starts += joined.starts
    return dict(joined.launched)


def _apply_exits(node, log: LogFacts, resolve, facts: ParsedNode, parsed) -> None:
    """Launcher-reported exits on their ranks, and the watchdog's lines."""
    for exit_fact in log.exits:
        if not _apply_exit(node, exit_fact, resolve, facts, parsed.ranks, log.pid_ranks):
            parsed.unplaced_exits.append((node, exit_fact))
    for fact in log.watchdog:
        rank = resolve(fact.rank, fact.local_rank)
        parsed.watchdog.append((node, rank, fact))
        if rank is not None:
            parsed.mentioned.add(rank)


def holds_more_than_steps(log: LogFacts) -> bool:
    """Does the log hold anything `apply_log` reads beyond the map's step summaries? Most
    logs of a big job do not."""
    return bool(
        log.local_to_global
        or log.host_ranks
        or log.exits
        or log.steps
        or log.signals
        or log.watchdog
        or _has_sources(log)
    )


def _has_sources(log: LogFacts) -> bool:
    return bool(
        log.collectives
        or log.peer_errors
        or log.nccl_config
        or log.slow_reports
        or log.named_ranks
        or log.rendezvous_errors
        or log.comm_inits
        or log.errors
        or log.nccl_warn
        or log.desync
        or log.mismatches
    )


def _learn_local_ranks(node, log: LogFacts, local_to_global, facts: ParsedNode) -> None:
    """The launcher's own maps place [defaultN] lines even when no process is left to read
    LOCAL_RANK from: torchrun's rendezvous result and failure summary, DeepSpeed's world
    info, an exit line naming both ranks."""
    for local, rank in log.local_to_global.items():
        local_to_global.setdefault(local, rank)
    for host in (node, facts.hostname):
        for local, rank in enumerate(log.host_ranks.get(host, ())):
            local_to_global.setdefault(local, rank)
    for exit_fact in log.exits:
        if exit_fact.rank is not None and exit_fact.local_rank is not None:
            local_to_global.setdefault(exit_fact.local_rank, exit_fact.rank)


def _apply_steps(node, log: LogFacts, resolve, ranks: dict[int, RankState], problem) -> None:
    def new_state(rank: int) -> RankState:
        return RankState(rank=rank, node=node)

    step_times, periods, unresolved = _walk_steps(log.steps, resolve, ranks, new_state)
    for rank, times in step_times.items():
        ranks[rank].step_time = _median_step_time(times)
    for rank, gaps in periods.items():
        if gaps:
            ranks[rank].log_period = _log_period(gaps)
    if unresolved:
        problem(node, log.path, f"{unresolved} step lines with a local rank but no RANK map")


def _walk_steps(steps, resolve, ranks: dict, new_state):
    """Each step line on its rank's state; per rank (in the order the lines first name them),
    what each step took and the gaps past the warm-up; the lines no rank was found for."""
    step_times: dict[int, list[float]] = defaultdict(list)
    periods: dict[int, list[float]] = defaultdict(list)
    unresolved = 0
    for record in steps:
        rank = resolve(record.rank, record.local_rank)
        if rank is None:
            unresolved += 1
            continue
        state = ranks.get(rank)
        if state is None:
            state = ranks[rank] = new_state(rank)
        took = _apply_step(state, record, periods[rank])
        if took is not None and took >= 0:
            step_times[rank].append(took)
    return step_times, periods, unresolved


class _StepState:
    """What a step line reads and moves of its rank (the map's stand-in for a RankState)."""

    __slots__ = ("last_step", "last_step_at")

    def __init__(self, rank: int) -> None:
        self.last_step: int | None = None
        self.last_step_at: datetime | None = None


def summarize_steps(logs: list[LogFacts]) -> list[list[StepSummary]] | None:
    """What each log's step lines leave on its ranks, the node's logs read in order from
    fresh ranks (the map's half of `_apply_steps`): per log, one summary a rank, in the
    order its lines first name them. None when a line names only a local rank (its rank is
    the merge's to resolve)."""
    states: dict[int, _StepState] = {}
    out = []
    for log in logs:
        step_times, periods, unresolved = _walk_steps(log.steps, _explicit, states, _StepState)
        if unresolved:
            return None
        summaries = []
        for rank, gaps in periods.items():
            state, times = states[rank], step_times.get(rank)
            summaries.append(
                StepSummary(
                    rank,
                    state.last_step,
                    state.last_step_at,
                    _median_step_time(times) if times else None,
                    _log_period(gaps) if gaps else None,
                )
            )
        out.append(summaries)
    return out


def fresh_for_steps(ranks: dict[int, RankState], logs) -> bool:
    """Do the logs' step summaries hold: has no earlier node's step line moved any of their
    ranks?"""
    for entry in logs:
        for summary in entry.steps:
            state = ranks.get(summary.rank)
            if state is not None and (
                state.last_step is not None or state.last_step_at is not None
            ):
                return False
    return True


def apply_step_summaries(node, summaries: list[StepSummary], ranks: dict[int, RankState]) -> None:
    """A log's step summaries on ranks no other node's step line moved: as `_apply_steps`."""
    for summary in summaries:
        state = ranks.get(summary.rank)
        if state is None:
            state = ranks[summary.rank] = RankState(rank=summary.rank, node=node)
        state.last_step, state.last_step_at = summary.last_step, summary.last_step_at
        if summary.step_time is not None:
            state.step_time = summary.step_time
        if summary.log_period is not None:
            state.log_period = summary.log_period


def _explicit(rank: int | None, local: int | None) -> int | None:
    return rank


def _log_period(gaps: list[float]) -> float:
    recent = sorted(gaps[-10:])
    return recent[len(recent) // 2]


def _apply_step(state: RankState, record, periods: list[float]) -> float | None:
    """One step line on its rank: the last step and when; the gap since the step before past
    the warm-up (in `periods`); what the step took, from the line or else the timestamps."""
    took = record.step_time
    if record.at and state.last_step_at and state.last_step is not None:
        advanced = record.step - state.last_step
        since = (record.at - state.last_step_at).total_seconds()
        if advanced > 0 and since >= 0:
            if took is None:  # no step_time= on the line: the timestamps say it
                took = since / advanced
            if state.last_step > WARMUP_STEPS:
                periods.append(since)
    if state.last_step is None or record.step >= state.last_step:
        if record.at is not None or state.last_step != record.step:
            state.last_step_at = record.at or (
                state.last_step_at if state.last_step == record.step else None
            )
        state.last_step = record.step
    return took


def _median_step_time(times: list[float]) -> float:
    """The median of the latest step times; the first steps (warm-up) only when all we have."""
    steady = times[WARMUP_STEPS:] or times
    recent = sorted(steady[-10:])
    return recent[len(recent) // 2]


def _apply_exit(node, exit_fact, resolve, facts: ParsedNode, ranks, pid_ranks) -> bool:
    """Record a launcher-reported exit on its rank; False when no rank can be named."""
    rank = exit_fact.rank
    if rank is None and exit_fact.pid is not None:
        rank = facts.rank_pids.get(exit_fact.pid, pid_ranks.get(exit_fact.pid))
    if rank is None:
        rank = resolve(None, exit_fact.local_rank)
    if rank is None:
        return False
    state = ranks.setdefault(rank, RankState(rank=rank, node=node))
    if state.local_rank is None and exit_fact.rank is not None:
        state.local_rank = exit_fact.local_rank
    # The launcher's own failure line and its summary repeat one exit: keep the first cause,
    # unless all we had was the launcher stopping the rank.
    known = state.exit_line or state.exit_code is not None
    if known and (
        exit_fact.exit_code is None or not (state.stopped_by_launcher or _stopped(state.exit_code))
    ):
        return True
    state.exit_code = exit_fact.exit_code
    state.exit_line = exit_fact.line.strip()
    state.stopped_by_launcher = exit_fact.stopped_by_launcher
    state.exited_at = exit_fact.at
    if state.pid is None:
        state.pid = exit_fact.pid
    return True


def _stopped(code: int | None) -> bool:
    return code in TERMINATED_BY_LAUNCHER


def _apply_sources(node, log: LogFacts, resolve, parsed: ParsedSnapshot) -> None:
    """Collective positions, peers named, NCCL's configuration, slow-rank reports, mentions.
    Each kind is walked only when the log holds any: at fleet scale every rank's log holds a
    few of the eleven, and this runs once a log."""
    mentioned = parsed.mentioned
    if log.collectives:
        collectives = parsed.collectives
        for fact in log.collectives:
            rank = fact.rank
            collectives.append((node, rank, fact))
            if rank is not None:
                mentioned.add(rank)
    if log.peer_errors:
        _apply_reported(node, log.peer_errors, resolve, parsed.peer_errors, mentioned)
    if log.nccl_config:
        _apply_reported(node, log.nccl_config, resolve, parsed.nccl_config, mentioned)
    for fact in log.slow_reports:
        _apply_slow_report(fact, parsed)
    if log.named_ranks:
        mentioned.update(log.named_ranks)
    if log.rendezvous_errors:
        parsed.rendezvous_errors += [(node, f.line) for f in log.rendezvous_errors[:3]]
    if log.comm_inits:
        parsed.comm_inits += [(node, fact) for fact in log.comm_inits]
    if log.errors or log.nccl_warn or log.desync or log.mismatches:
        _mention_resolved(log, resolve, mentioned)


def _mention_resolved(log: LogFacts, resolve, mentioned: set[int]) -> None:
    """The ranks an error, NCCL WARN, desync or mismatch line names were observed."""
    for bucket in (log.errors, log.nccl_warn, log.desync, log.mismatches):
        for fact in bucket:
            rank = resolve(fact.rank, fact.local_rank)
            if rank is not None:
                mentioned.add(rank)


def _apply_reported(node, facts, resolve, target: list, mentioned: set[int]) -> None:
    """(rank, local rank, fact) lines on their reporting rank, resolved as a line is."""
    for rank, local, fact in facts:
        reporter = rank if rank is not None else resolve(None, local)
        target.append((node, reporter, fact))
        if reporter is not None:
            mentioned.add(reporter)


_REPORT_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)\]")
_MIN_RTT = re.compile(r"MnRtt/Rnk: (\d{1,12}(?:\.\d{1,6})?)ms")
# Megatron names a slowest rank in every report; only a real spread makes it a straggler.
STRAGGLER_SPREAD = 1.2


def _apply_slow_report(fact: SlowFact, parsed: ParsedSnapshot) -> None:
    """A straggler detector's report: a heartbeat (the job ran then), and a slow rank only
    when it says so explicitly or its round trip stands out from the fastest rank's."""
    if fact.source != "megatron":
        parsed.slow_reports.append(fact)
        return
    if "MxRtt/Rnk: " not in fact.line or fact.value is None:
        return  # "Bottom N ranks" lists four ranks every time, healthy or not
    stamp = _REPORT_TIME.search(fact.line, 0, 200)
    at = parse_timestamp(stamp.group(1)) if stamp else None
    if at is not None:
        parsed.heartbeats.append((at, fact.value / 1000))
    fastest = _MIN_RTT.search(fact.line, 0, 400)
    if fastest and fact.value >= STRAGGLER_SPREAD * float(fastest.group(1)):
        parsed.slow_reports.append(fact)


def place_comm_inits(parsed: ParsedSnapshot, world: int | None) -> None:
    """A world communicator's set-up line names a rank and its pid: the rank was observed,
    and its pid can be joined with dmesg. Sub-communicators number ranks within their group,
    so only lines whose size is the world's are placed."""
    for node, fact in parsed.comm_inits:
        if world is None or fact.nranks != world:
            continue
        parsed.mentioned.add(fact.rank)
        state = parsed.ranks.get(fact.rank)
        if state is None:
            state = parsed.ranks[fact.rank] = RankState(rank=fact.rank, node=node)
        if state.pid is None and fact.pid is not None:
            state.pid = fact.pid


def line_rank(fact: LineFact, local_to_global: dict[int, int]) -> int | None:
    if fact.rank is not None:
        return fact.rank
    if fact.local_rank is not None:
        return local_to_global.get(fact.local_rank)
    return None


def apply_signal_progress(parsed: ParsedSnapshot) -> None:
    """Progress the line reader found in any form (tqdm, trainer dicts, `step: 800`, ...)
    moves a rank as the lab's step lines do: its last step and when, its pace between lines."""
    for rank, found in parsed.signals.signalled.items():
        if not found.progress:
            continue  # most ranks of a big job: only their step lines moved them
        timed = sorted(
            {(s.at, s.step) for s in found.progress if s.at is not None and s.step is not None}
        )
        if not timed:
            continue
        state = parsed.ranks.get(rank)
        at, step = timed[-1]
        if state is None:
            node = found.progress[-1].node or ""
            state = parsed.ranks[rank] = RankState(rank=rank, node=node)
        if (
            state.last_step is None
            or step > state.last_step
            or (step == state.last_step and state.last_step_at is None)
        ):
            state.last_step, state.last_step_at = step, at
        gaps = [
            ((later - earlier).total_seconds(), done - before)
            for (earlier, before), (later, done) in pairwise(timed)
            if done > before > WARMUP_STEPS
        ]
        if gaps and state.log_period is None:
            state.log_period = sorted(g for g, _ in gaps)[len(gaps) // 2]
        if gaps and state.step_time is None:
            per_step = sorted(g / n for g, n in gaps)
            state.step_time = per_step[len(per_step) // 2]
        if state.step_time is None and step > WARMUP_STEPS:
            # One bar line and no second to time it against: the bar's own measured pace.
            latest = max(found.progress, key=lambda s: s.line_no)
            state.step_time = bar_step_time(latest.text)
