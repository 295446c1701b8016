"""From raw evidence to one row per rank, plus the node-level facts the verdict needs.

How a rank is identified: a process's RANK environment variable is authoritative. Log lines give
the rank from `[rankN]` / `rank=N` / `[Rank N]`, from a torchrun `[defaultN]:` prefix (a local
rank, turned into a global one with the node's LOCAL_RANK -> RANK map), or from the file name
(`rank3.log`, `trace_rank_3`). A process without RANK (the torchrun launcher) is not a rank.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analysis.evidence import EvidenceStatus, NodeEvidence, SnapshotEvidence
from analysis.jobtime import first_stamp
from analysis.parsers.dmesg import KernelFacts, parse_dmesg
from analysis.parsers.environ import COMMS_PREFIXES, int_or_none, parse_environ_subset
from analysis.parsers.flight_recorder import FrDump, parse_flight_recorder
from analysis.parsers.logs import (
    ExitFact,
    LineFact,
    LogFacts,
    WatchdogFact,
    parse_log,
    parse_timestamp,
)
from analysis.parsers.nccl import (
    CollectiveFact,
    CommInitFact,
    NcclConfigFact,
    PeerFact,
    SlowFact,
)
from analysis.parsers.nvidia_smi import GpuFacts, parse_nvidia_smi
from analysis.parsers.ps import PsRow, parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.pyspy_samples import WindowSample, parse_samples
from analysis.parsers.shell_init import ShellInitSetting, parse_shell_init
from analysis.schedulers.attach import scheduler_ranks, scheduler_world_size
from analysis.signals import LineSource, Signal
from analysis.signals.place import host_map, kernel_signals, placed, snapshot_signals
from analysis.signals.summary import SignalFacts
from analysis.stacks import frame_kind, relevant_frame, stack_signature

# Where ranks meet at start-up: a rank with another value never joins the others.
RENDEZVOUS = frozenset({"MASTER_ADDR", "MASTER_PORT"})
# Ranks whose launcher killed them because another rank failed: not the first to leave.
TERMINATED_BY_LAUNCHER = frozenset({-15, 143})
# The largest job the analysis believes in: rank numbers and world sizes past it are claims
# of untrusted evidence (the analysis is linear in the world size).
MAX_WORLD = 131_072
# The first steps of a job (compilation, cache warm-up) are slower: not the job's step time.
WARMUP_STEPS = 2


@dataclass
class RankState:
    """One rank as seen in one snapshot. `stack` is the main thread, innermost frame first."""

    rank: int
    node: str
    pid: int | None = None
    ppid: int | None = None
    state: str = ""  # R/S/D/Z/T from ps, "" when unknown
    local_rank: int | None = None
    world_size: int | None = None
    stack_signature: str = ""
    innermost_frame: str = ""  # "all_reduce (torch/distributed/distributed_c10d.py:3252)"
    stack: list[str] = field(default_factory=list)
    last_step: int | None = None
    last_step_at: datetime | None = None
    exit_code: int | None = None
    # Beyond the brief's columns, still plain values:
    process_seen: bool = False  # a live process with this RANK was found
    frame_kind: str = ""  # collective / init / outside / "" (no stack)
    frame_name: str = ""  # "all_reduce"
    step_time: float | None = None  # seconds, median of the last logged step times
    log_period: float | None = None  # seconds between its step lines (one every N steps)
    stack_error: str = ""  # why there is no stack (py-spy failure)
    exit_line: str = ""  # the launcher line that reported exit_code
    gpu: int | None = None  # from nvidia-smi's process table, when the rank's pid is in it
    gpu_util: int | None = None  # percent
    gpu_memory_mib: int | None = None
    started_at: datetime | None = None  # when the process started (ps etimes)
    stopped_by_launcher: bool = False  # the launcher killed it after another rank failed
    exited_at: datetime | None = None  # when the launcher says it failed
    window: WindowSample | None = None  # py-spy's sampling window: how much of it it waited


@dataclass
class NodeFacts:
    node: str
    hostname: str
    status: EvidenceStatus
    collected_at: datetime | None  # when the console's visit of the node began
    has_process_evidence: bool
    # Every process ps listed was tied to a rank or to no rank (its environ was read): only
    # then can a rank be missing from this node.
    ranks_identified: bool
    kernel: KernelFacts
    gpus: GpuFacts
    shell_init: list[ShellInitSetting]
    rank_pids: dict[int, int]  # pid -> rank, for live rank processes


@dataclass
class ParsedSnapshot:
    ranks: dict[int, RankState]
    env: dict[int, dict[str, str]]  # rank -> NCCL_/TORCH_/CUDA_/GLOO_ variables only
    nodes: dict[str, NodeFacts]
    logs: list[tuple[str, LogFacts]]  # (node, facts)
    watchdog: list[tuple[str, int | None, WatchdogFact]]  # (node, global rank, fact)
    dumps: list[FrDump]
    expected_world_size: int | None
    problems: list[dict[str, str]]
    collected_at: datetime | None
    has_process_evidence: bool
    # Ranks named by any log line (error, watchdog, exit, NCCL): observed, even without steps.
    mentioned: set[int] = field(default_factory=set)
    # (node, global rank or None, fact) per source, ranks resolved through the node's maps.
    collectives: list[tuple[str, int | None, CollectiveFact]] = field(default_factory=list)
    peer_errors: list[tuple[str, int | None, PeerFact]] = field(default_factory=list)
    nccl_config: list[tuple[str, int | None, NcclConfigFact]] = field(default_factory=list)
    slow_reports: list[SlowFact] = field(default_factory=list)
    # (node, exit) for exits no rank could be tied to: a process of the job died there.
    unplaced_exits: list[tuple[str, ExitFact]] = field(default_factory=list)
    # (when, seconds per step) from periodic framework reports: the job was alive then.
    heartbeats: list[tuple[datetime, float | None]] = field(default_factory=list)
    # (node, line) where the launcher's agents could not reach the rendezvous.
    rendezvous_errors: list[tuple[str, str]] = field(default_factory=list)
    # (node, fact): NCCL communicator set-up lines, placed once the world size is known.
    comm_inits: list[tuple[str, CommInitFact]] = field(default_factory=list)
    # The first stamped line of each log collected whole (the job's start when ps has none).
    log_starts: list[datetime] = field(default_factory=list)
    # What the line reader (analysis.signals) found, summed per rank and node: when each
    # rank's log last moved, its first failure, the peers it reports; NCCL RAS per node.
    signals: SignalFacts = field(default_factory=SignalFacts)
    # Every signal placed so far, and each node's ncclras output, until `signals` is built.
    raw_signals: list[Signal] = field(default_factory=list)
    ras_outputs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        if self.expected_world_size:
            return self.expected_world_size
        return max(self.ranks, default=-1) + 1


def extract_ranks(evidence: SnapshotEvidence) -> list[RankState]:
    """One RankState per rank found in the evidence, ordered by rank."""
    parsed = parse_snapshot(evidence, flight_recorder=False)
    return [parsed.ranks[r] for r in sorted(parsed.ranks)]


def parse_snapshot(evidence: SnapshotEvidence, flight_recorder: bool = True) -> ParsedSnapshot:
    parsed = ParsedSnapshot(
        ranks={},
        env={},
        nodes={},
        logs=[],
        watchdog=[],
        dumps=[],
        expected_world_size=None,
        problems=[],
        collected_at=evidence.collected_at or _latest(n.collected_at for n in evidence.nodes),
        has_process_evidence=False,
    )
    world_sizes: list[int] = []
    # A bundle of one node: its local ranks are the global ones (the node is the whole job,
    # or the bundle would hold the others too).
    single_node = len(evidence.nodes) == 1

    def problem(node: str, source: str, text: str) -> None:
        parsed.problems.append({"node": node, "source": source, "problem": text})

    hosts = host_map((n.node, n.hostname) for n in evidence.nodes)
    for node_ev in sorted(evidence.nodes, key=lambda n: n.node):
        assigned = scheduler_ranks(evidence.scheduler, node_ev.node, node_ev.hostname)
        facts = _parse_node(node_ev, parsed.ranks, parsed.env, world_sizes, problem, assigned)
        parsed.nodes[node_ev.node] = facts
        local_to_global = {
            parsed.ranks[rank].local_rank: rank
            for rank in facts.rank_pids.values()
            if parsed.ranks[rank].local_rank is not None
        }
        when = node_ev.collected_at or evidence.collected_at
        cut = set(node_ev.truncated)
        for path in sorted(node_ev.logs):
            source = LineSource(path, node_ev.node, facts.rank_pids, hosts, when, single_node=False)
            log = parse_log(path, node_ev.logs[path], source)
            parsed.logs.append((node_ev.node, log))
            if log.file_rank is not None and node_ev.logs[path].strip():
                parsed.mentioned.add(log.file_rank)  # a rank that wrote any line was observed
            for text in log.problems:
                problem(node_ev.node, path, text)
            if log.world_size:
                world_sizes.append(log.world_size)
            _apply_log(node_ev.node, log, local_to_global, facts, parsed, problem, single_node)
            if f"logs:{path}" not in cut and "output" not in cut:  # the log is held whole
                start = first_stamp(node_ev.logs[path], node_ev.collected_at)
                parsed.log_starts += [start] if start else []
        for path in sorted(node_ev.flight_recorder) if flight_recorder else ():
            dump = parse_flight_recorder(path, node_ev.flight_recorder[path])
            for text in dump.problems:
                problem(node_ev.node, path, text)
            if dump.entries or not dump.problems:
                parsed.dumps.append(dump)
        for name in node_ev.truncated:
            problem(node_ev.node, name, "cut at the size cap: its head is missing")
        kernel = LineSource("dmesg.txt", node_ev.node, facts.rank_pids, hosts, when)
        parsed.raw_signals += kernel_signals(node_ev.node, facts.kernel, facts.rank_pids, kernel)
        if node_ev.ncclras:
            parsed.ras_outputs.append((node_ev.node, node_ev.ncclras))

    world_sizes += [fact.nranks for _, fact in parsed.comm_inits]
    expected = evidence.expected_world_size or scheduler_world_size(evidence.scheduler)
    expected = expected or (max(world_sizes) if world_sizes else None)
    expected = _bounded_world(parsed, expected)
    _place_comm_inits(parsed, expected)
    for state in parsed.ranks.values():
        if state.world_size is None and expected:
            state.world_size = expected
    parsed.expected_world_size = expected
    parsed.has_process_evidence = any(f.has_process_evidence for f in parsed.nodes.values())
    parsed.signals = snapshot_signals(parsed, expected)
    parsed.mentioned.update(parsed.signals.by_rank)
    return parsed


def _bounded_world(parsed: ParsedSnapshot, claimed: int | None) -> int | None:
    """A world size or rank number is a claim of the evidence (a manifest, WORLD_SIZE, a log
    line), and the analysis is linear in it: past MAX_WORLD ranks it is not believed."""
    huge = [rank for rank in parsed.ranks if not 0 <= rank < MAX_WORLD]
    for rank in huge:
        del parsed.ranks[rank]
        parsed.env.pop(rank, None)
    if huge:
        parsed.problems.append(
            {
                "node": "",
                "source": "ranks",
                "problem": f"{len(huge)} rank numbers over {MAX_WORLD} ignored",
            }
        )
    parsed.mentioned = {r for r in parsed.mentioned if 0 <= r < MAX_WORLD}
    if claimed is not None and not 0 < claimed <= MAX_WORLD:
        parsed.problems.append(
            {
                "node": "",
                "source": "world size",
                "problem": f"world size {claimed} not believed (over {MAX_WORLD})",
            }
        )
        return None
    return claimed


def _latest(values) -> datetime | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


# srun's own numbering of its tasks, in every task's environment.
SLURM_TASK_VARIABLES = frozenset({"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"})


def _slurm_task_rank(variables: dict[str, str], *, use: bool) -> None:
    """A job started by `srun` with one task per rank whose script takes its rank from
    SLURM_PROCID (setting RANK in os.environ, which /proc/PID/environ never shows): the task
    id is the rank, SLURM_LOCALID the local rank, SLURM_NTASKS the world size. Only on a node
    where no process has RANK: under `srun torchrun` the launcher's SLURM_PROCID is the node's
    index, and its children carry RANK. Slurm's variables are dropped either way (they differ
    between ranks by design: no environment difference)."""
    task = {name: variables.pop(name) for name in SLURM_TASK_VARIABLES if name in variables}
    if use and "SLURM_PROCID" in task:
        variables["RANK"] = task["SLURM_PROCID"]
        variables.setdefault("LOCAL_RANK", task.get("SLURM_LOCALID", ""))
        variables.setdefault("WORLD_SIZE", task.get("SLURM_NTASKS", ""))


def _process_rank(variables: dict[str, str], assigned: tuple[int, int | None] | None) -> int | None:
    """The process's RANK (popped), else the rank a scheduler assigned it (its LOCAL_RANK
    then too, when the environment has none)."""
    rank = int_or_none(variables.pop("RANK", None))
    if rank is None and assigned is not None:
        rank, local = assigned
        variables.setdefault("LOCAL_RANK", "" if local is None else str(local))
    return rank


def _parse_node(node_ev: NodeEvidence, ranks, env, world_sizes, problem, assigned) -> NodeFacts:
    """`assigned`: pid -> (rank, local rank) a scheduler gives for processes whose environment
    has no RANK (Ray Train's workers)."""
    node = node_ev.node
    if not node_ev.status.gathered:
        problem(node, "node", f"no evidence: {node_ev.status.note}")
    elif node_ev.status.partial:
        problem(node, "node", f"evidence stopped short (what came is read): {node_ev.status.note}")
    ps_rows, ps_problems = parse_ps(node_ev.ps)
    for text in ps_problems:
        problem(node, "ps", text)
    by_pid: dict[int, PsRow] = {row.pid: row for row in ps_rows}
    rank_pids: dict[int, int] = {}
    # Only what the analysis reads: RANK and its kin, the rendezvous and the comms settings.
    wanted = RENDEZVOUS | {"RANK", "LOCAL_RANK", "WORLD_SIZE"} | SLURM_TASK_VARIABLES
    parsed = {}
    for pid in sorted(node_ev.environ):
        variables, env_problems = parse_environ_subset(node_ev.environ[pid], wanted, COMMS_PREFIXES)
        for text in env_problems:
            problem(node, f"environ {pid}", text)
        parsed[pid] = variables
    slurm_tasks = not any("RANK" in variables for variables in parsed.values())
    for pid, variables in parsed.items():
        _slurm_task_rank(variables, use=slurm_tasks)
        rank = _process_rank(variables, assigned.get(pid))
        if rank is None:
            continue  # a launcher or helper process, not a rank
        row = by_pid.get(pid)
        if row is not None and row.state == "Z":
            # A zombie is a rank that has exited; its environ is still readable.
            pass
        if rank in ranks and ranks[rank].process_seen:
            problem(node, f"environ {pid}", f"RANK={rank} also held by pid {ranks[rank].pid}")
            continue
        state = ranks.setdefault(rank, RankState(rank=rank, node=node))
        state.node = node
        state.pid = pid
        state.ppid = row.ppid if row else None
        state.state = row.state if row else ""
        state.local_rank = int_or_none(variables.pop("LOCAL_RANK", None))
        state.world_size = int_or_none(variables.pop("WORLD_SIZE", None))
        state.process_seen = row is None or row.state != "Z"
        if row is not None and row.elapsed_s is not None and node_ev.collected_at is not None:
            state.started_at = node_ev.collected_at - timedelta(seconds=row.elapsed_s)
        if state.world_size:
            world_sizes.append(state.world_size)
        env[rank] = variables  # NCCL_/TORCH_/CUDA_/GLOO_ and MASTER_ADDR/PORT left
        rank_pids[pid] = rank
        _apply_stack(node_ev, pid, state, problem)
    for pid in sorted(set(node_ev.pyspy) - set(rank_pids)):
        if pid in node_ev.environ:
            continue  # a non-rank process (launcher) that was dumped too
        problem(node, f"py-spy {pid}", "stack without an environment: rank unknown")
    gpus = _gpus(node, node_ev, problem)
    by_index = {gpu.index: gpu for gpu in gpus.gpus}
    for process in gpus.processes:
        rank = rank_pids.get(process.pid)
        if rank is not None and process.gpu in by_index:
            state = ranks[rank]
            state.gpu = process.gpu
            state.gpu_util = by_index[process.gpu].utilization
            state.gpu_memory_mib = process.memory_mib
    return NodeFacts(
        node=node,
        hostname=node_ev.hostname,
        status=node_ev.status,
        collected_at=node_ev.collected_at,
        has_process_evidence=node_ev.ps is not None or bool(node_ev.environ),
        ranks_identified=_ranks_identified(node_ev, by_pid, rank_pids),
        kernel=_kernel(node, node_ev, problem),
        gpus=gpus,
        shell_init=_shell(node, node_ev, problem),
        rank_pids=rank_pids,
    )


def _ranks_identified(node_ev: NodeEvidence, by_pid: dict[int, PsRow], rank_pids) -> bool:
    """Is every process ps listed tied to a rank or known not to be one? A process without
    its environ is unknown, unless it is a rank's parent (the launcher, a wrapper script) or
    child (a data-loader worker)."""
    if node_ev.ps is None:
        return bool(node_ev.environ)
    parents = {by_pid[pid].ppid for pid in rank_pids if pid in by_pid}
    return all(
        pid in node_ev.environ or pid in parents or row.ppid in rank_pids
        for pid, row in by_pid.items()
    )


def _kernel(node, node_ev, problem) -> KernelFacts:
    kernel = parse_dmesg(node_ev.dmesg)
    for text in kernel.problems:
        problem(node, "dmesg", text)
    return kernel


def _gpus(node, node_ev, problem) -> GpuFacts:
    gpus = parse_nvidia_smi(node_ev.nvidia_smi)
    for text in gpus.problems:
        problem(node, "nvidia-smi", text)
    return gpus


def _shell(node, node_ev, problem) -> list[ShellInitSetting]:
    settings, shell_problems = parse_shell_init(node_ev.shell_init)
    for text in shell_problems:
        problem(node, "shell start-up files", text)
    return settings


def _apply_stack(node_ev: NodeEvidence, pid: int, state: RankState, problem) -> None:
    if pid in node_ev.pyspy_samples:
        state.window, sample_problems = parse_samples(node_ev.pyspy_samples[pid], pid)
        for text in sample_problems:
            problem(node_ev.node, f"py-spy samples {pid}", text)
    raw = node_ev.pyspy.get(pid)
    if raw is None:
        state.stack_error = node_ev.pyspy_errors.get(pid, "no py-spy dump")
        return
    threads, stack_problems = parse_pyspy(raw)
    for text in stack_problems:
        problem(node_ev.node, f"py-spy {pid}", text)
    thread = main_thread(threads)
    if thread is None:
        state.stack_error = "py-spy output had no frames"
        return
    state.stack = [str(f) for f in thread.frames]
    state.stack_signature = stack_signature(thread.frames)
    frame = relevant_frame(thread.frames)
    state.innermost_frame = str(frame) if frame else ""
    state.frame_name = frame.name if frame else ""
    state.frame_kind = frame_kind(frame)


def _apply_log(
    node, log: LogFacts, local_to_global, facts: NodeFacts, parsed, problem, single_node: bool
) -> None:
    # The launcher's own maps place [defaultN] lines even when no process is left to read
    # LOCAL_RANK from: torchrun's rendezvous result and failure summary, DeepSpeed's world info.
    for local, rank in log.local_to_global.items():
        local_to_global.setdefault(local, rank)
    for host in (node, facts.hostname):
        for local, rank in enumerate(log.host_ranks.get(host, ())):
            local_to_global.setdefault(local, rank)
    for exit_fact in log.exits:
        if exit_fact.rank is not None and exit_fact.local_rank is not None:
            local_to_global.setdefault(exit_fact.local_rank, exit_fact.rank)

    def resolve(rank: int | None, local: int | None) -> int | None:
        if rank is not None:
            return rank
        if local is None:
            return None
        return local_to_global.get(local, local if single_node else None)

    _apply_steps(node, log, resolve, parsed.ranks, problem)
    parsed.raw_signals += placed(log.signals, resolve, log.pid_ranks)
    for exit_fact in log.exits:
        if not _apply_exit(node, exit_fact, resolve, facts, parsed.ranks, log.pid_ranks):
            parsed.unplaced_exits.append((node, exit_fact))
    for fact in log.watchdog:
        rank = resolve(fact.rank, fact.local_rank)
        parsed.watchdog.append((node, rank, fact))
        if rank is not None:
            parsed.mentioned.add(rank)
    _apply_sources(node, log, resolve, parsed)


def _apply_steps(node, log: LogFacts, resolve, ranks: dict[int, RankState], problem) -> None:
    unresolved = 0
    step_times: dict[int, list[float]] = defaultdict(list)
    periods: dict[int, list[float]] = defaultdict(list)
    for record in log.steps:
        rank = resolve(record.rank, record.local_rank)
        if rank is None:
            unresolved += 1
            continue
        state = ranks.get(rank)
        if state is None:
            state = ranks[rank] = RankState(rank=rank, node=node)
        took = record.step_time
        if record.at and state.last_step_at and state.last_step is not None:
            advanced = record.step - state.last_step
            since = (record.at - state.last_step_at).total_seconds()
            if advanced > 0 and since >= 0:
                if took is None:  # no step_time= on the line: the timestamps say it
                    took = since / advanced
                if state.last_step > WARMUP_STEPS:
                    periods[rank].append(since)
        if state.last_step is None or record.step >= state.last_step:
            if record.at is not None or state.last_step != record.step:
                state.last_step_at = record.at or (
                    state.last_step_at if state.last_step == record.step else None
                )
            state.last_step = record.step
        if took is not None and took >= 0:
            step_times[rank].append(took)
    for rank, times in step_times.items():
        ranks[rank].step_time = _median_step_time(times)
    for rank, gaps in periods.items():
        recent = sorted(gaps[-10:])
        ranks[rank].log_period = recent[len(recent) // 2]
    if unresolved:
        problem(node, log.path, f"{unresolved} step lines with a local rank but no RANK map")


def _median_step_time(times: list[float]) -> float:
    """The median of the latest step times; the first steps (warm-up) only when all we have."""
    steady = times[WARMUP_STEPS:] or times
    recent = sorted(steady[-10:])
    return recent[len(recent) // 2]


def _apply_exit(node, exit_fact, resolve, facts: NodeFacts, ranks, pid_ranks) -> bool:
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
    """Collective positions, peers named, NCCL's configuration, slow-rank reports, mentions."""
    mentioned = parsed.mentioned
    for fact in log.collectives:
        rank = fact.rank
        parsed.collectives.append((node, rank, fact))
        if rank is not None:
            mentioned.add(rank)
    for target, facts in (
        (parsed.peer_errors, log.peer_errors),
        (parsed.nccl_config, log.nccl_config),
    ):
        for rank, local, fact in facts:
            reporter = resolve(rank, local)
            target.append((node, reporter, fact))
            if reporter is not None:
                mentioned.add(reporter)
    for fact in log.slow_reports:
        _apply_slow_report(fact, parsed)
    mentioned.update(log.named_ranks)
    parsed.rendezvous_errors += [(node, f.line) for f in log.rendezvous_errors[:3]]
    parsed.comm_inits += [(node, fact) for fact in log.comm_inits]
    for bucket in (log.errors, log.nccl_warn, log.desync, log.mismatches):
        for fact in bucket:
            rank = resolve(fact.rank, fact.local_rank)
            if rank is not None:
                mentioned.add(rank)


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


def _place_comm_inits(parsed: ParsedSnapshot, world: int | None) -> None:
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
