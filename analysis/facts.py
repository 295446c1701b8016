"""Everything the rules reason about, computed once from one parse of the evidence.

`build_facts` turns a ParsedSnapshot (and the one before it, when there is one) into a frozen
`Facts`: who was observed, who is missing on positive evidence and who is simply unobserved,
whether the job is provably moving, where each rank stands in each process group's sequence of
collectives, what NCCL reports choosing on each node, which peers other ranks blame. The rules
(analysis/rules/) only read it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property, partial
from operator import attrgetter, is_not

from analysis import jobtime
from analysis.alignment import FlightRecorderReading, GroupStop, read_dumps, read_watchdog
from analysis.departures import Departure, departures_of
from analysis.envdiff import env_diffs, shell_init_findings
from analysis.failure_index import FailureIndex
from analysis.gpushape import GpuSeries, RankGpuHint, join
from analysis.groups import CollectiveRecord, collective_records
from analysis.ncclconf import nccl_config_diffs, node_addresses
from analysis.progress import Progress, RankTimes, job_step_time, progress_of
from analysis.signals import Signal
from analysis.snapshot_parse import (
    MAX_WORLD,
    TERMINATED_BY_LAUNCHER,
    ParsedNode,
    ParsedSnapshot,
    RankState,
)
from analysis.stacks import base_name


@dataclass(frozen=True)
class PeerBlame:
    """A rank's NCCL/gloo line names a peer it lost: the peer's ranks are the likely culprits."""

    reporter: int | None
    node: str
    peer_ranks: tuple[int, ...]
    peer_node: str | None
    reason: str
    line: str


@dataclass(frozen=True)
class Facts:
    snap: ParsedSnapshot
    prev: ParsedSnapshot | None
    world: int
    rank_node: dict[int, str]
    observed: frozenset[int]
    missing: tuple[int, ...]  # positive evidence: gone from ps, exited, reported gone
    exited: tuple[int, ...]  # the subset with an exit code or a zombie
    unobserved: tuple[int, ...]  # the evidence says nothing about them
    departures: dict[int, Departure]
    rendezvous_errors: tuple[tuple[str, str], ...]  # (node, line): agents never met
    node_exits: tuple[tuple[str, str], ...]  # (node, line): a job process died, rank unknown
    progress: Progress
    flight_recorder: dict | None  # fr.to_json(), None without dumps: what the diagnosis keeps
    group_stops: tuple[GroupStop, ...]  # fr.stops: each group's stop, cause first
    watchdog: dict | None
    collectives: dict[int, tuple[CollectiveRecord, ...]]
    env_diffs: list[dict]
    shell: list[dict]
    nccl_diffs: list[dict]
    peer_blames: tuple[PeerBlame, ...]
    slow_reports: dict[int, tuple[int, tuple[str, ...]]]  # rank -> (times named, lines)
    oom_by_pid: dict[int, tuple[str, str, bool]]  # pid -> (node, line, since the job started)
    local_maps: dict[str, dict[int, int]]  # node -> local rank -> global rank
    in_collective: tuple[int, ...]
    outside: tuple[int, ...]
    in_init: tuple[int, ...]
    with_stack: int
    job_started: datetime | None  # when the job's first rank started (ps), once per diagnosis
    failures: FailureIndex  # the signalled ranks' failures by kind and peer, read once
    rank_times: RankTimes  # every rank's step time and log period, each node's latest step
    ops: Counter = field(default_factory=Counter)
    signatures: Counter = field(default_factory=Counter)
    # rank -> its GPU's series and how it was joined (pid, CUDA_VISIBLE_DEVICES, LOCAL_RANK).
    gpu: dict[int, tuple[GpuSeries, str]] = field(default_factory=dict)
    # The flight-recorder dumps read together: groups, stops, culprits and victims.
    fr: FlightRecorderReading | None = None
    # rank -> why: in a one-node job's shared log most ranks time out, these never do.
    quiet: dict[int, str] = field(default_factory=dict)
    # rank -> the stall report (Horovod's coordinator) whose list of ready ranks leaves it out
    not_ready: dict[int, Signal] = field(default_factory=dict)
    # rank -> "T" or "D": its live process stopped or in uninterruptible sleep (ps)
    held: dict[int, str] = field(default_factory=dict)
    # The ranks with a state but no live process, in the order of `ranks` (few at most).
    no_process: tuple[int, ...] = ()
    # The lowest and highest last step of any rank; None without a step.
    step_range: tuple[int, int] | None = None

    @property
    def ranks(self) -> dict[int, RankState]:
        return self.snap.ranks

    @property
    def nodes(self) -> dict[str, ParsedNode]:
        return self.snap.nodes

    @property
    def any_step(self) -> bool:
        return self.step_range is not None

    def step_of(self, ranks) -> int | None:
        """The highest last step of these ranks, None without one (in C: rules ask it of
        every rank of the world)."""
        states = map(self.snap.ranks.get, ranks)
        steps = map(_LAST_STEP, filter(_KNOWN, states))
        return max(filter(_KNOWN, steps), default=None)

    @cached_property
    def waiting_step(self) -> int | None:
        """The highest last step of the ranks waiting in a collective, or of every rank when
        none waits: what the rules' texts say "after step N" of (asked by several, read once)."""
        if not self.in_collective:
            return self.step_range[1] if self.step_range else None
        return self.step_of(self.in_collective)

    @property
    def latest_step_at(self) -> datetime | None:
        """When the job's latest step was logged, of any rank."""
        return max(self.rank_times.node_latest.values(), default=None)

    @cached_property
    def step_time(self) -> float | None:
        """The job's median step time (analysis.progress.job_step_time), read once."""
        return job_step_time(self.snap, self.rank_times)

    def main_op(self) -> str | None:
        return self.ops.most_common(1)[0][0] if self.ops else None

    def known_pid(self, rank: int) -> int | None:
        state = self.ranks.get(rank)
        if state and state.pid is not None:
            return state.pid
        if self.prev and rank in self.prev.ranks:
            return self.prev.ranks[rank].pid
        return None

    def node_of(self, rank: int) -> str | None:
        if rank in self.rank_node:
            return self.rank_node[rank]
        if self.prev and rank in self.prev.ranks:
            return self.prev.ranks[rank].node
        return None

    def job_kills(self, node: ParsedNode) -> list:
        return job_kills(node, self.job_started)

    def before_job(self, line: str) -> bool:
        """A line stamped before the job began: an earlier run's, never quoted."""
        return jobtime.line_before_job(line, self.job_started, self.snap.collected_at)


def job_kills(node: ParsedNode, job_started: datetime | None) -> list:
    """OOM kills that can belong to this job: not stamped before its first rank started
    (dmesg keeps kills from days ago; they explain nothing about tonight's hang)."""
    return [k for k in node.kernel.oom_kills if not jobtime.before_job(k.at, job_started)]


def build_facts(snap: ParsedSnapshot, prev: ParsedSnapshot | None = None) -> Facts:
    walk = _RankWalk(snap)
    failures = FailureIndex(snap.signals)
    departures = departures_of(snap, failures)
    quiet = quiet_in_shared_log(snap)
    not_ready = not_ready_ranks(snap, failures)
    observed = _observed(snap, walk.seen, failures) | set(quiet)
    if not_ready:
        observed |= set(range(snap.world_size))
    missing, unobserved = _missing_and_unobserved(snap, prev, observed, departures, walk)
    rank_node, by_kind = walk.rank_node, walk.by_kind
    collective = by_kind["collective"]
    started = jobtime.job_started(walk.started, snap.log_starts)
    fr = read_dumps(snap.dumps, snap.expected_world_size) if snap.dumps else None
    return Facts(
        quiet=quiet,
        not_ready=not_ready,
        snap=snap,
        prev=prev,
        world=snap.world_size,
        rank_node=rank_node,
        observed=frozenset(observed),
        missing=tuple(missing),
        exited=tuple(sorted(departures)),
        unobserved=tuple(unobserved),
        departures=departures,
        rendezvous_errors=tuple(snap.rendezvous_errors[:6]),
        node_exits=tuple(
            (node, fact.line.strip())
            for node, fact in snap.unplaced_exits
            if not fact.stopped_by_launcher and fact.exit_code not in (0, *TERMINATED_BY_LAUNCHER)
        ),
        progress=progress_of(snap, prev, walk.times),
        flight_recorder=fr.to_json() if fr and fr.dump_ranks else None,
        group_stops=fr.stops if fr else (),
        watchdog=read_watchdog(snap.watchdog),
        collectives=collective_records(snap),
        env_diffs=env_diffs(snap.env, rank_node),
        shell=shell_init_findings({n: f.shell_init for n, f in snap.nodes.items()}),
        nccl_diffs=nccl_config_diffs(snap),
        peer_blames=tuple(_peer_blames(snap)),
        slow_reports=_slow_reports(snap),
        oom_by_pid=_oom_by_pid(snap, started),
        local_maps=walk.local_maps,
        in_collective=tuple(sorted(map(_RANK, collective))),
        outside=tuple(sorted(map(_RANK, by_kind["outside"]))),
        in_init=tuple(sorted(map(_RANK, by_kind["init"]))),
        with_stack=walk.with_stack,
        job_started=started,
        failures=failures,
        rank_times=walk.times,
        ops=_ops(collective),
        signatures=Counter(map(attrgetter("stack_signature"), collective)),
        fr=fr,
        gpu=_gpu_by_rank(snap),
        held=walk.held,
        no_process=tuple(rank for rank, _ in walk.not_seen),
        step_range=(min(walk.steps), max(walk.steps)) if walk.steps else None,
    )


_RANK = attrgetter("rank")  # 32,000 states read by C, not a generator's frame each
_LAST_STEP = attrgetter("last_step")
_KNOWN = partial(is_not, None)


class _RankWalk:
    """What build_facts reads of every rank, in one walk of the ranks (at fleet scale each
    walk of 32,000 states costs more than the little each reads)."""

    def __init__(self, snap: ParsedSnapshot) -> None:
        self.rank_node: dict[int, str] = {}
        # with a stack, by where it waits
        self.by_kind: dict[str, list[RankState]] = {"collective": [], "outside": [], "init": []}
        self.with_stack = 0
        self.started: list[datetime | None] = []  # the ranks' process starts (ps)
        self.seen: set[int] = set()  # a live process, a stack or a step
        self.not_seen: list[tuple[int, str]] = []  # (rank, node): no live process
        self.per_node: dict[str, int] = defaultdict(int)  # ranks a node holds
        self.widest = 0  # the most ranks a node runs, as LOCAL_RANK / LOCAL_WORLD_SIZE say
        self.local_maps: dict[str, dict[int, int]] = {}  # node -> local rank -> global rank
        self.held: dict[int, str] = {}  # rank -> "T" / "D", as Facts.held
        self.steps: list[int | None] = []  # every rank's last step
        # What progress reads of every rank (analysis.progress.RankTimes).
        self.times = RankTimes([], [], {})
        by_kind, per_node = self.by_kind, self.per_node
        local_maps: dict[str, dict[int, int]] = defaultdict(dict)
        rank_node, seen, started, steps = self.rank_node, self.seen, self.started, self.steps
        step_times, log_periods, node_latest = self.times
        widest = 0
        for rank, state in snap.ranks.items():
            node = rank_node[rank] = state.node
            per_node[node] += 1
            step_times.append(state.step_time)
            log_periods.append(state.log_period)
            at = state.last_step_at
            if at is not None:
                latest = node_latest.get(node)
                if latest is None or at > latest:
                    node_latest[node] = at
            if state.stack_signature:
                self.with_stack += 1
                kind = by_kind.get(state.frame_kind)
                if kind is not None:
                    kind.append(state)
            started.append(state.started_at)
            steps.append(state.last_step)
            if state.process_seen or state.stack or state.last_step is not None:
                seen.add(rank)
            if not state.process_seen:
                self.not_seen.append((rank, node))
            elif state.state[:1] in ("T", "D"):
                self.held[rank] = state.state[:1]
            local_rank = state.local_rank
            if local_rank is not None or state.local_world_size:
                widest = max(widest, state.local_world_size or 0, (local_rank or 0) + 1)
            if local_rank is not None:
                local = local_maps[node]
                if state.process_seen or local_rank not in local:
                    local[local_rank] = rank
        self.widest = widest
        self.local_maps = dict(local_maps)  # a plain dict: the rules ask it of any node
        self.steps = [step for step in steps if step is not None]


def _ops(collective: list[RankState]) -> Counter:
    """The collectives the ranks wait in, by base name: a name once per distinct frame."""
    ops: Counter = Counter()
    for frame, count in Counter(map(attrgetter("frame_name"), collective)).items():
        ops[base_name(frame)] += count
    return ops


def _gpu_by_rank(snap: ParsedSnapshot) -> dict[int, tuple[GpuSeries, str]]:
    series = [one for node in snap.nodes.values() for one in node.gpu_series]
    if not series:
        return {}
    pid_gpu = {
        (name, process.pid): process.gpu
        for name, node in snap.nodes.items()
        for process in node.gpus.processes
    }
    hints = [
        RankGpuHint(
            rank=rank,
            node=state.node,
            pid_gpu=pid_gpu.get((state.node, state.pid)),
            visible=snap.env.get(rank, {}).get("CUDA_VISIBLE_DEVICES", ""),
            local_rank=state.local_rank,
        )
        for rank, state in snap.ranks.items()
        if state.process_seen
    ]
    return join(series, hints)


# ------------------------------------------------------------------ observed / missing


def _observed(snap: ParsedSnapshot, seen: set[int], failures: FailureIndex) -> set[int]:
    """A rank with a live process, a stack, a dump or any log line naming it was observed; so
    was every rank of the job when NCCL's RAS reported on a job-wide communicator or named a
    rank against the others (RAS hears from every process of the job). `seen`: the ranks
    with a live process, a stack or a step (_RankWalk), added to."""
    seen.update(snap.mentioned)
    seen.update(filter(partial(is_not, None), map(_RANK, snap.dumps)))  # in C: a dump a rank
    # A rank another rank's line names (the one it waits for, or lost) was observed by it.
    seen.update(s.peer for _, s in failures.with_peer() if 0 <= s.peer < MAX_WORLD)
    world = snap.world_size
    reached = any(comm.size == world for _, report in snap.signals.ras for comm in report.comms)
    reached = reached or any(s.kind == "ras_ok" for s in snap.signals.ras_signals)
    # RAS names a rank missing, dead or behind against what it heard from all the others.
    named = [s.peer for s in _ras_lines(snap) if s.peer is not None and 0 <= s.peer < world]
    if reached or named:
        seen.update(range(world))
    return seen


def _ras_lines(snap: ParsedSnapshot) -> list:
    lines = list(snap.signals.ras_signals)
    lines += [s for found in snap.signals.by_node.values() for s in found if s.kind == "ras"]
    return lines


def _missing_and_unobserved(
    snap: ParsedSnapshot,
    prev: ParsedSnapshot | None,
    observed: set[int],
    departures: dict[int, Departure],
    walk: _RankWalk,
) -> tuple[list[int], list[int]]:
    """Missing needs positive evidence; the rest of the expected world is unobserved."""
    # ps without the environments names processes, not ranks: it condemns no one; and a
    # stream cut short (partial evidence) proves nobody gone either.
    looked = {n for n, f in snap.nodes.items() if f.status.complete and f.ranks_identified}
    # Every node answered with its process table, and those nodes can hold the whole world:
    # a rank found nowhere is gone. (One node of a 64-rank job says nothing of the others.)
    everywhere = bool(snap.nodes) and len(looked) == len(snap.nodes) and _holds_world(snap, walk)
    missing: set[int] = set(departures)
    for rank, node in walk.not_seen:
        if node in looked:
            missing.add(rank)  # known on a node whose ps no longer shows it
    if prev is not None:
        for rank, state in prev.ranks.items():
            now = snap.ranks.get(rank)
            if state.process_seen and state.node in looked and not (now and now.process_seen):
                missing.add(rank)
    # Unobserved only within a world the evidence states (a manifest, WORLD_SIZE, a launcher's
    # or NCCL's count): a world guessed from the highest rank seen leaves no one unobserved.
    expected = set(range(snap.world_size)) if snap.expected_world_size else set()
    absent = expected - observed - missing
    if everywhere:
        missing |= absent
        absent = set()
    return sorted(missing), sorted(absent)


_DESYNC = ("desync",)
_READY = re.compile(r"\[ready ranks: (\d{1,6}(?:, ?\d{1,6}){0,4095})\]")


def not_ready_ranks(snap: ParsedSnapshot, failures: FailureIndex) -> dict[int, Signal]:
    """A stall report lists, per stalled tensor, the ranks that submitted it; within a stated
    world the others never reached the collective. (Every rank of the world is then accounted
    for: ready, or left out.)"""
    world = snap.expected_world_size
    if not world:
        return {}
    # The stall reports only, in reading order (a fleet's ranks hold 64,000 other failures).
    reports = [s for _, s in failures.of_kinds(_DESYNC)]
    reports += failures.nodes_of_kinds(_DESYNC)
    out: dict[int, Signal] = {}
    for signal in reports:
        match = _READY.search(signal.text)
        if match:
            ready = {int(r) for r in match.group(1).split(",")}
            for rank in sorted(set(range(world)) - ready):
                out.setdefault(rank, signal)
    return out


def quiet_in_shared_log(snap: ParsedSnapshot) -> dict[int, str]:
    """One node, a stated world, and one log that holds the watchdog timeouts of several
    ranks (the job's shared stdout): the ranks of the world that never time out in it wrote
    to it too, and were not waiting in that collective. A few of them at most."""
    world = snap.expected_world_size
    if len(snap.nodes) != 1 or not world:
        return {}
    shared = [
        log for _, log in snap.logs_of_note if len({w.rank for w in log.watchdog} - {None}) >= 2
    ]
    if not shared:
        return {}
    reporters = {rank for _, rank, _ in snap.watchdog if rank is not None}
    quiet = sorted(set(range(world)) - reporters)
    if not quiet or len(quiet) > max(1, world // 4) or len(reporters) < world / 2:
        return {}
    seq = next((w.seq for log in shared for w in log.watchdog if w.seq is not None), None)
    where = f" in collective #{seq}" if seq is not None else ""
    told = ", ".join(map(str, sorted(reporters)))
    return {
        rank: f"rank {rank}: no watchdog timeout in the shared log while ranks {told} timed out"
        f"{where}"
        for rank in quiet
    }


def _holds_world(snap: ParsedSnapshot, walk: _RankWalk) -> bool:
    """Can the nodes in the snapshot hold every rank? Each node as many as the fullest one."""
    room = max([walk.widest, *walk.per_node.values()], default=0)
    return room * len(snap.nodes) >= snap.world_size


# ------------------------------------------------------------------ node-level joins


def _oom_by_pid(snap: ParsedSnapshot, started: datetime | None) -> dict[int, tuple[str, str, bool]]:
    """pid -> (node, line, recent): every kill of this job (a pid match is decisive at any
    age; a kill stamped before the job began is of another process, whatever its pid)."""
    pids = {}
    for node, node_facts in snap.nodes.items():
        for kill in job_kills(node_facts, started):
            pids[kill.pid] = (node, kill.line, True)
    return pids


def _peer_blames(snap: ParsedSnapshot) -> list[PeerBlame]:
    """Map each peer a line names (rank, host or address) to the ranks that live there."""
    if not snap.peer_errors:
        return []  # most snapshots: no walk of the ranks or lines for nothing to place
    addresses = node_addresses(snap)
    ranks_of_node: dict[str, set[int]] = defaultdict(set)
    for rank, state in snap.ranks.items():
        ranks_of_node[state.node].add(rank)
    for node, reporter, _ in snap.nccl_config:
        if reporter is not None:
            ranks_of_node[node].add(reporter)  # a rank whose NCCL wrote there runs there
    blames = []
    for node, reporter, fact in snap.peer_errors:
        peer_node = None
        if fact.peer_rank is not None:
            peer_ranks: tuple[int, ...] = (fact.peer_rank,)
            peer_node = snap.ranks[fact.peer_rank].node if fact.peer_rank in snap.ranks else None
        else:
            peer_node = addresses.get(fact.peer_addr or "") or addresses.get(fact.peer_host or "")
            if peer_node is None or peer_node == node:
                continue  # a peer we cannot place blames no one
            peer_ranks = tuple(sorted(ranks_of_node.get(peer_node, ())))
        if reporter is not None and reporter in peer_ranks:
            continue
        blames.append(PeerBlame(reporter, node, peer_ranks, peer_node, fact.reason, fact.line))
    return blames


_SLOW_QUOTED = 5


def _slow_reports(snap: ParsedSnapshot) -> dict[int, tuple[int, tuple[str, ...]]]:
    """rank -> (how many reports named it slow, the first few lines)."""
    named: dict[int, list[str]] = defaultdict(list)
    counts: Counter[int] = Counter()
    for fact in snap.slow_reports:
        counts[fact.rank] += 1
        if len(named[fact.rank]) < _SLOW_QUOTED:
            named[fact.rank].append(fact.line)
    return {rank: (count, tuple(named[rank])) for rank, count in counts.items()}


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
