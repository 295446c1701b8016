"""The shapes one parse of a snapshot produces: one `RankState` per rank, `ParsedNode` per node,
and the whole `ParsedSnapshot` the facts are built from (analysis/snapshot_parse.py builds them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from analysis.evidence import EvidenceStatus
from analysis.gpushape import GpuSeries
from analysis.parsers.dmesg import KernelFacts
from analysis.parsers.flight_recorder import FrDump
from analysis.parsers.logs import ExitFact, LogFacts, WatchdogFact
from analysis.parsers.nccl import CollectiveFact, CommInitFact, NcclConfigFact, PeerFact, SlowFact
from analysis.parsers.nvidia_smi import GpuFacts
from analysis.parsers.pyspy_samples import WindowSample
from analysis.parsers.shell_init import ShellInitSetting
from analysis.signals import Signal
from analysis.signals.summary import SignalFacts, SignalPart

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
    local_world_size: int | None = None  # LOCAL_WORLD_SIZE: ranks its node runs
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

    def copy(self) -> RankState:
        """A copy (the same values, a list shared as a field's copy shares it): each field set
        in turn, half the CPU of the constructor's 28 arguments; the merge copies a joined
        node's states, 32,000 of them at fleet scale. tests/analysis/test_node_join.py checks
        it copies every field."""
        new = object.__new__(RankState)
        new.rank = self.rank
        new.node = self.node
        new.pid = self.pid
        new.ppid = self.ppid
        new.state = self.state
        new.local_rank = self.local_rank
        new.local_world_size = self.local_world_size
        new.world_size = self.world_size
        new.stack_signature = self.stack_signature
        new.innermost_frame = self.innermost_frame
        new.stack = self.stack
        new.last_step = self.last_step
        new.last_step_at = self.last_step_at
        new.exit_code = self.exit_code
        new.process_seen = self.process_seen
        new.frame_kind = self.frame_kind
        new.frame_name = self.frame_name
        new.step_time = self.step_time
        new.log_period = self.log_period
        new.stack_error = self.stack_error
        new.exit_line = self.exit_line
        new.gpu = self.gpu
        new.gpu_util = self.gpu_util
        new.gpu_memory_mib = self.gpu_memory_mib
        new.started_at = self.started_at
        new.stopped_by_launcher = self.stopped_by_launcher
        new.exited_at = self.exited_at
        new.window = self.window
        return new


@dataclass
class StepSummary:
    """What one log's step lines leave on one rank (`ranklogs.summarize_steps`, in the map):
    its last step and when, the median step time and the gap between lines the log gives
    (None: it gives none, the rank keeps what it had)."""

    rank: int
    last_step: int
    last_step_at: datetime | None
    step_time: float | None
    log_period: float | None


@dataclass
class JoinedLogs:
    """A node's logs in the merge's form (`ranklogs.join_logs`), made from the node's parse
    alone: what `apply_log` adds log by log, as one list a kind, in the same order. Made only
    when no line needs the merge's LOCAL_RANK map and no log holds a launcher's exits or step
    lines left unsummarized; never changed by a merge (it copies out of it)."""

    logs: list[tuple[str, LogFacts]]  # (node, facts) every log
    of_note: list[tuple[str, LogFacts]]  # the logs `holds_more_than_steps`
    problems: list[tuple[str, str]]  # (path, text)
    world_sizes: list[int]
    mentioned: tuple[int, ...]  # in the order the merge would add them
    steps: list[StepSummary]  # every log's, in log order
    step_lines: bool
    signals: SignalPart  # placed, and summed per rank (`signals.summary.signal_part`)
    watchdog: list[tuple[str, int | None, WatchdogFact]]
    collectives: list[tuple[str, int | None, CollectiveFact]]
    peer_errors: list[tuple[str, int | None, PeerFact]]
    nccl_config: list[tuple[str, int | None, NcclConfigFact]]
    slow_reports: list[SlowFact]  # each still judged by the merge
    rendezvous_errors: list[tuple[str, str]]
    comm_inits: list[tuple[str, CommInitFact]]
    launched: dict[int, int]  # pid -> rank, as the launchers' lines say
    starts: list[datetime]


@dataclass
class JoinedProcesses:
    """A node's rank processes as the merge makes them when no earlier node named any of their
    ranks (the common case; `nodemap.join_node`): each one's RankState whole, which every
    merge copies, and what else the node's processes give it."""

    states: list[RankState]  # in process order
    rank_pids: dict[int, int]  # pid -> rank
    env: dict[int, dict[str, str]]  # rank -> environment, in process order
    world_sizes: list[int]
    problems: list[tuple[str, str]]  # (source, text): the py-spy readers', in process order
    unknown_stacks: list[int]  # pids py-spy dumped with no environment read
    ranks_identified: bool
    # the node's kernel lines' signals, summed (None: the merge's to read)
    kernel_signals: SignalPart | None
    # Copies of `states` by rank, made ahead (on the reader, as the node comes in), with the
    # node's own step summaries on them when its logs are joined (`stepped`): the first merge
    # takes them as its own (`snapshot_parse._adopt_rank_processes`), a later one copies.
    made_ahead: dict[int, RankState] | None = None
    stepped: bool = False


@dataclass
class NodeJoin:
    """What of one node's parse is already in the merge's form (None: the merge's own way)."""

    logs: JoinedLogs | None
    processes: JoinedProcesses | None
    # The ranks the logs' step summaries name beyond the node's own processes' (whose
    # adopted states no step line has moved yet): what `fresh_for_steps` still has to ask.
    steps_beyond: list[int] = field(default_factory=list)
    # The logs' step summaries of those ranks, in order: all the merge applies of the node's
    # steps when it took states made ahead with their steps on them.
    steps_of_others: list[StepSummary] = field(default_factory=list)


@dataclass
class ParsedNode:
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
    # pid -> rank as the node's logs say (a launcher's start lines, NCCL's communicator set-up
    # `host:pid:tid ... rank R nranks N`): ties a process that is gone, and left no environ,
    # to its rank when RAS or the kernel names it by pid.
    log_pids: dict[int, int] = field(default_factory=dict)
    # Its GPUs over time: DCGM's hour, else the probe's few seconds (analysis/gpushape.py).
    gpu_series: list[GpuSeries] = field(default_factory=list)


@dataclass
class ParsedSnapshot:
    ranks: dict[int, RankState]
    env: dict[int, dict[str, str]]  # rank -> NCCL_/TORCH_/CUDA_/GLOO_ variables only
    nodes: dict[str, ParsedNode]
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
    # Every signal placed so far, and each node's ncclras output, until `signals` is built:
    # the parts summed already (a joined node's), then those placed one at a time since.
    signal_parts: list[SignalPart] = field(default_factory=list)
    raw_signals: list[Signal] = field(default_factory=list)
    ras_outputs: list[tuple[str, str]] = field(default_factory=list)
    step_lines: bool = False  # any log held a step line (placed or not)
    # The logs holding more than step lines (`ranklogs.holds_more_than_steps`: errors, NCCL
    # and watchdog lines, signals...), in the order of `logs`: what a walk for lines reads.
    logs_of_note: list[tuple[str, LogFacts]] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        if self.expected_world_size:
            return self.expected_world_size
        return max(self.ranks, default=-1) + 1
