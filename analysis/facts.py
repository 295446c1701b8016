"""Everything the rules reason about, computed once from one parse of the evidence.

`build_facts` turns a ParsedSnapshot (and the one before it, when there is one) into a frozen
`Facts`: who was observed, who is missing on positive evidence and who is simply unobserved,
whether the job is provably moving, where each rank stands in each process group's sequence of
collectives, what NCCL reports choosing on each node, which peers other ranks blame. The rules
(analysis/rules/) only read it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from analysis import jobtime
from analysis.alignment import FlightRecorderReading, GroupStop, read_dumps, read_watchdog
from analysis.envdiff import env_diffs, shell_init_findings
from analysis.gpushape import GpuSeries, RankGpuHint, join
from analysis.groups import CollectiveRecord, collective_records
from analysis.ncclconf import nccl_config_diffs, node_addresses
from analysis.ranks import (
    TERMINATED_BY_LAUNCHER,
    WARMUP_STEPS,
    NodeFacts,
    ParsedSnapshot,
    RankState,
)
from analysis.records import as_opt_float, as_opt_int, as_str
from analysis.stacks import base_name, compact_ranks

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


@dataclass(frozen=True)
class Departure:
    """A rank that left: how we know, and whether the launcher stopped it (a victim)."""

    rank: int
    reason: str
    line: str
    exit_code: int | None
    stopped_by_launcher: bool
    at: datetime | None = None


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
    ops: Counter = field(default_factory=Counter)
    signatures: Counter = field(default_factory=Counter)
    # rank -> its GPU's series and how it was joined (pid, CUDA_VISIBLE_DEVICES, LOCAL_RANK).
    gpu: dict[int, tuple[GpuSeries, str]] = field(default_factory=dict)
    # The flight-recorder dumps read together: groups, stops, culprits and victims.
    fr: FlightRecorderReading | None = None

    @property
    def ranks(self) -> dict[int, RankState]:
        return self.snap.ranks

    @property
    def nodes(self) -> dict[str, NodeFacts]:
        return self.snap.nodes

    @property
    def any_step(self) -> bool:
        return any(s.last_step is not None for s in self.snap.ranks.values())

    def step_of(self, ranks) -> int | None:
        known = [self.ranks[r].last_step for r in ranks if r in self.ranks]
        known = [s for s in known if s is not None]
        return max(known) if known else None

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

    def job_kills(self, node: NodeFacts) -> list:
        return job_kills(node, self.job_started)

    def before_job(self, line: str) -> bool:
        """A line stamped before the job began: an earlier run's, never quoted."""
        return jobtime.line_before_job(line, self.job_started, self.snap.collected_at)


def job_kills(node: NodeFacts, job_started: datetime | None) -> list:
    """OOM kills that can belong to this job: not stamped before its first rank started
    (dmesg keeps kills from days ago; they explain nothing about tonight's hang)."""
    return [k for k in node.kernel.oom_kills if not jobtime.before_job(k.at, job_started)]


def build_facts(snap: ParsedSnapshot, prev: ParsedSnapshot | None = None) -> Facts:
    rank_node = {r: s.node for r, s in snap.ranks.items()}
    departures = _departures(snap)
    observed = _observed(snap)
    missing, unobserved = _missing_and_unobserved(snap, prev, observed, departures)
    with_stack = [s for s in snap.ranks.values() if s.stack_signature]
    in_collective = sorted(s.rank for s in with_stack if s.frame_kind == "collective")
    started = jobtime.job_started((s.started_at for s in snap.ranks.values()), snap.log_starts)
    fr = read_dumps(snap.dumps, snap.expected_world_size) if snap.dumps else None
    return Facts(
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
        progress=_progress(snap, prev),
        flight_recorder=fr.to_json() if fr and fr.dump_ranks else None,
        group_stops=fr.stops if fr else (),
        watchdog=read_watchdog(snap.watchdog),
        collectives=collective_records(snap),
        env_diffs=env_diffs(snap.env, rank_node),
        shell=shell_init_findings({n: f.shell_init for n, f in snap.nodes.items()}),
        nccl_diffs=nccl_config_diffs(snap),
        peer_blames=tuple(_peer_blames(snap, node_addresses(snap))),
        slow_reports=_slow_reports(snap),
        oom_by_pid=_oom_by_pid(snap, started),
        local_maps=_local_maps(snap),
        in_collective=tuple(in_collective),
        outside=tuple(sorted(s.rank for s in with_stack if s.frame_kind == "outside")),
        in_init=tuple(sorted(s.rank for s in with_stack if s.frame_kind == "init")),
        with_stack=len(with_stack),
        job_started=started,
        ops=Counter(base_name(s.frame_name) for s in with_stack if s.frame_kind == "collective"),
        signatures=Counter(s.stack_signature for s in with_stack if s.frame_kind == "collective"),
        fr=fr,
        gpu=_gpu_by_rank(snap),
    )


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


def _observed(snap: ParsedSnapshot) -> set[int]:
    """A rank with a live process, a stack, a dump or any log line naming it was observed."""
    seen = {
        r for r, s in snap.ranks.items() if s.process_seen or s.stack or s.last_step is not None
    }
    seen.update(snap.mentioned)
    seen.update(d.rank for d in snap.dumps if d.rank is not None)
    return seen


def _departures(snap: ParsedSnapshot) -> dict[int, Departure]:
    gone: dict[int, Departure] = {}
    for rank, state in snap.ranks.items():
        if state.process_seen:
            continue
        if state.exit_code is not None or state.exit_line:
            stopped = state.stopped_by_launcher or state.exit_code in TERMINATED_BY_LAUNCHER
            reason = exit_reason(state.exit_code) if state.exit_code is not None else "it failed"
            gone[rank] = Departure(
                rank, reason, state.exit_line, state.exit_code, stopped, state.exited_at
            )
        elif state.state == "Z":
            gone[rank] = Departure(rank, "its process is a zombie (exited)", "", None, False)
    return gone


def _missing_and_unobserved(
    snap: ParsedSnapshot,
    prev: ParsedSnapshot | None,
    observed: set[int],
    departures: dict[int, Departure],
) -> tuple[list[int], list[int]]:
    """Missing needs positive evidence; the rest of the expected world is unobserved."""
    # ps without the environments names processes, not ranks: it condemns no one; and a
    # stream cut short (partial evidence) proves nobody gone either.
    looked = {n for n, f in snap.nodes.items() if f.status.complete and f.ranks_identified}
    # Every node answered with its process table: a rank found nowhere is gone.
    everywhere = bool(snap.nodes) and len(looked) == len(snap.nodes)
    missing: set[int] = set(departures)
    for rank, state in snap.ranks.items():
        if not state.process_seen and state.node in looked:
            missing.add(rank)  # known on a node whose ps no longer shows it
    if prev is not None:
        for rank, state in prev.ranks.items():
            now = snap.ranks.get(rank)
            if state.process_seen and state.node in looked and not (now and now.process_seen):
                missing.add(rank)
    expected = set(range(snap.world_size))
    absent = expected - observed - missing
    if everywhere:
        missing |= absent
        absent = set()
    return sorted(missing), sorted(absent)


# ------------------------------------------------------------------ progress


def job_step_time(snap: ParsedSnapshot) -> float | None:
    """The job's own median step time, warm-up steps excluded; None when unknown."""
    times = sorted(s.step_time for s in snap.ranks.values() if s.step_time)
    if not times:
        # A straggler detector's round trip is the step time as the framework measures it.
        times = sorted(took for _, took in snap.heartbeats if took)
    return times[len(times) // 2] if times else None


def job_log_period(snap: ParsedSnapshot) -> float | None:
    """How often the job writes a step line (every step, or every N): the silence to expect
    between two lines. Falls back to the step time."""
    periods = sorted(s.log_period for s in snap.ranks.values() if s.log_period)
    if periods:
        return max(periods[len(periods) // 2], job_step_time(snap) or 0.0)
    return job_step_time(snap)


def _progress(snap: ParsedSnapshot, prev: ParsedSnapshot | None) -> Progress:
    if prev is not None:
        return _two_snapshots(snap, prev)
    ages = _step_ages(snap)
    if not ages:
        return Progress("none", None, note="no timed step line")
    age = round(min(ages), 1)
    pace = job_log_period(snap)
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


def _step_ages(snap: ParsedSnapshot) -> list[float]:
    """Seconds since each rank's last step line, as its node's clock read it when the
    console came (the snapshot's time for ranks whose node gave none); heartbeats too."""
    ages = []
    for state in snap.ranks.values():
        if state.last_step_at is None:
            continue
        node = snap.nodes.get(state.node)
        now = (node.collected_at if node else None) or snap.collected_at
        if now is not None:
            ages.append(max(0.0, (now - state.last_step_at).total_seconds()))
    if snap.collected_at is not None:
        ages += [max(0.0, (snap.collected_at - at).total_seconds()) for at, _ in snap.heartbeats]
    return ages


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


# ------------------------------------------------------------------ node-level joins


def _local_maps(snap: ParsedSnapshot) -> dict[str, dict[int, int]]:
    maps: dict[str, dict[int, int]] = {}
    for state in snap.ranks.values():
        if state.local_rank is not None:
            local = maps.setdefault(state.node, {})
            if state.process_seen or state.local_rank not in local:
                local[state.local_rank] = state.rank
    return maps


def _oom_by_pid(snap: ParsedSnapshot, started: datetime | None) -> dict[int, tuple[str, str, bool]]:
    """pid -> (node, line, recent): every kill of this job (a pid match is decisive at any
    age; a kill stamped before the job began is of another process, whatever its pid)."""
    pids = {}
    for node, node_facts in snap.nodes.items():
        for kill in job_kills(node_facts, started):
            pids[kill.pid] = (node, kill.line, True)
    return pids


def _peer_blames(snap: ParsedSnapshot, addresses: dict[str, str]) -> list[PeerBlame]:
    """Map each peer a line names (rank, host or address) to the ranks that live there."""
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


# ------------------------------------------------------------------ exit codes

EXIT_MEANING = {
    137: "SIGKILL, often the OOM killer",
    -9: "SIGKILL, often the OOM killer",
    139: "SIGSEGV, segfault",
    -11: "SIGSEGV, segfault",
    134: "SIGABRT, abort",
    -6: "SIGABRT, abort",
    -15: "SIGTERM, stopped by the launcher",
    143: "SIGTERM, stopped by the launcher",
    -7: "SIGBUS, often /dev/shm too small",
    135: "SIGBUS, often /dev/shm too small",
    1: "error exit",
}


def exit_reason(code: int) -> str:
    meaning = EXIT_MEANING.get(code, "")
    return f"it exited with code {code}" + (f" ({meaning})" if meaning else "")


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
