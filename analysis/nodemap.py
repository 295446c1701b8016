"""The map half of a snapshot's parse: one node's evidence read into a `NodeParse`, alone.

Every parser that reads one node's text runs here (ps, environ, py-spy, nvidia-smi, dmesg,
shell start-up files, logs, flight-recorder dumps), so the worker that collected a node can
parse it as it arrives, in parallel with the others; `analysis.snapshot_parse.parse_snapshot` is the
reduce: it merges the nodes' parses in node order and does what crosses nodes (a RANK held on
two nodes, a rank's log on another node than its process, the world size, the line reader's
sums, then the facts and the rules).

A node's parse depends on two things beyond its own evidence: the host names of the other
nodes (a line that names a host is tied to that node) and which of its pids hold a rank (a
RANK another node already holds is not this node's). What the parse asked of either is
recorded (`asked_hosts`, `asked_pids`), so the reduce knows whether the answers still hold
once every node is in; when one does not, that node is parsed again from its evidence.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, ClassVar

from analysis import codec, fr_shared
from analysis.evidence import EvidenceStatus, NodeEvidence
from analysis.gpushape import GpuSeries, node_series
from analysis.jobtime import first_stamp
from analysis.parsers.dmesg import KernelFacts, parse_dmesg
from analysis.parsers.environ import COMMS_PREFIXES, int_or_none, parse_environ_subset
from analysis.parsers.flight_recorder import (
    MAX_TEXT_CHARS,
    FrDump,
    FrEntry,
    _short,
    _text,
    parse_flight_recorder,
)
from analysis.parsers.logs import LogFacts, parse_log
from analysis.parsers.nvidia_smi import GpuFacts, parse_nvidia_smi
from analysis.parsers.ps import PsRow, parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.pyspy_samples import WindowSample, parse_samples
from analysis.parsers.shell_init import ShellInitSetting, parse_shell_init
from analysis.ranklogs import apply_step_summaries, join_logs, summarize_steps
from analysis.rankmodel import (
    RENDEZVOUS,
    JoinedLogs,
    JoinedProcesses,
    NodeJoin,
    RankState,
    StepSummary,
)
from analysis.signals import LineSource
from analysis.signals.place import kernel_signals
from analysis.signals.summary import SignalPart, signal_part
from analysis.signals.who import master_pods
from analysis.stacks import frame_kind, relevant_frame, stack_signature

# The stored form's version: a parse stored by another version is parsed again, never read.
NODE_PARSE_VERSION = 7  # 2: columns; 3: step lines summarized; 4: nested; 5: one time a column;
# 6: a column of empty lists or maps as [], one of a few distinct scalars as its JSON text;
# 7: a dump's entry times kept apart (FrDump.created_ns), a node's alike entries stored once

# srun's own numbering of its tasks, in every task's environment.
SLURM_TASK_VARIABLES = frozenset({"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"})
_WANTED = RENDEZVOUS | {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}
_WANTED |= SLURM_TASK_VARIABLES

_MISSING = object()


@dataclass
class RankProcess:
    """A process of the node whose environment names a rank, as far as the node alone says."""

    pid: int
    rank: int
    local_rank: int | None
    world_size: int | None
    local_world_size: int | None
    env: dict[str, str]  # NCCL_/TORCH_/CUDA_/GLOO_ and MASTER_ADDR/PORT left
    sampled: bool  # py-spy's sampling window was taken of it
    window: WindowSample | None
    sample_problems: list[str]
    dumped: bool  # py-spy gave a dump
    stack_problems: list[str]
    stack: list[str] | None  # the main thread's frames; None: the dump had none
    stack_signature: str = ""
    innermost_frame: str = ""
    frame_name: str = ""
    frame_kind: str = ""
    stack_error: str = ""  # why there is no dump


@dataclass
class LogParse:
    facts: LogFacts
    written: bool  # the file holds any line (a rank that wrote one was observed)
    master_pods: bool  # it lists a PyTorchJob's master pod (its rank 0)
    start: datetime | None  # its first stamped line, when the log is held whole
    # Its step lines as they leave each rank (`facts.steps` is then empty): a few fields a
    # rank for the merge to read, not a record a line.
    steps: list[StepSummary] = field(default_factory=list)


@dataclass
class NodeParse:
    """One node's evidence, parsed: what the reduce needs of it, and nothing of the raw text
    but the ncclras reports (read once every node's addresses are known)."""

    node: str
    hostname: str
    status: EvidenceStatus
    collected_at: datetime | None
    when: datetime | None  # the time the line reader gave stamps without a year
    context: str  # digest of what the scheduler said of this node (its lines, its pids' ranks)
    ps_present: bool
    ps_rows: list[PsRow]
    ps_problems: list[str]
    environ_pids: list[int]
    environ_problems: list[tuple[int, str]]
    processes: list[RankProcess]
    pyspy_pids: list[int]
    gpus: GpuFacts
    kernel: KernelFacts
    shell_init: list[ShellInitSetting]
    shell_problems: list[str]
    gpu_series: list[GpuSeries]
    logs: list[LogParse]
    dumps: list[FrDump]
    truncated: list[str]
    ncclras: str | None
    ras_texts: list[str]
    # What the logs' parse asked of the snapshot: host -> node ("" when unknown), pid -> rank
    # (-1 when none); None when it read the whole map.
    asked_hosts: dict[str, str] | None = field(default_factory=dict)
    asked_pids: dict[int, int] | None = field(default_factory=dict)
    assumed_pids: dict[int, int] = field(default_factory=dict)  # pid -> rank the logs saw
    # The stored form's (`analysis.fr_shared`), empty in memory: the node's distinct
    # flight-recorder entries, and every dump's as indices into them (in dump order).
    fr_entries: list[FrEntry] = field(default_factory=list)
    fr_entry_ids: list[int] = field(default_factory=list)
    # Not a field (never stored: it repeats the fields' records): the node in the merge's
    # form, made once from the fields (`join_node`) when the parse is read back, so each
    # merge of the snapshot extends lists a node instead of placing a record at a time.
    join: ClassVar[NodeJoin | None] = None


def scheduler_context(
    assigned: Mapping[int, tuple[int, int | None]], log: tuple[str, str] | None
) -> str:
    """A digest of what a scheduler said of one node: the map and the merge compare it."""
    if not assigned and log is None:
        return _NO_CONTEXT  # no scheduler: every node's, computed once
    return _digest(assigned, log)


def _digest(assigned: Mapping[int, tuple[int, int | None]], log: tuple[str, str] | None) -> str:
    text = json.dumps([sorted(assigned.items()), log])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


_NO_CONTEXT = _digest({}, None)


def map_node(
    node_ev: NodeEvidence,
    *,
    hosts: Mapping[str, str],
    snapshot_collected_at: datetime | None = None,
    assigned: Mapping[int, tuple[int, int | None]] | None = None,
    scheduler_log: tuple[str, str] | None = None,
    rank_pids: Mapping[int, int] | None = None,
    flight_recorder: bool = True,
    step_summaries: bool = True,
) -> NodeParse:
    """Parse one node. `hosts`: how lines spell the snapshot's nodes, as far as known
    (`signals.place.host_map`); `assigned`: pid -> (rank, local rank) a scheduler gives;
    `scheduler_log`: its words about this node, (path, text), read as one more log;
    `rank_pids`: which pids hold a rank, when the merge knows better than the node (a RANK
    another node holds); `step_summaries`: the logs' step lines summarized per rank (when
    every one names its rank), else kept line by line."""
    assigned = assigned or {}
    if scheduler_log is not None:
        node_ev = replace(node_ev, logs={**node_ev.logs, scheduler_log[0]: scheduler_log[1]})
    ps_rows, ps_problems = parse_ps(node_ev.ps)
    environ_problems: list[tuple[int, str]] = []
    parsed: dict[int, dict[str, str]] = {}
    for pid in sorted(node_ev.environ):
        variables, problems = parse_environ_subset(node_ev.environ[pid], _WANTED, COMMS_PREFIXES)
        environ_problems += [(pid, text) for text in problems]
        parsed[pid] = variables
    slurm_tasks = not any("RANK" in variables for variables in parsed.values())
    processes = []
    for pid, variables in parsed.items():
        _slurm_task_rank(variables, use=slurm_tasks)
        rank = _process_rank(variables, assigned.get(pid))
        if rank is not None:
            processes.append(_process(node_ev, pid, rank, variables))
    if rank_pids is None:
        rank_pids = own_rank_pids(processes, {row.pid: row for row in ps_rows})
    when = node_ev.collected_at or snapshot_collected_at
    asked_hosts, asked_pids = _Asked(hosts), _Asked(rank_pids)
    cut = set(node_ev.truncated)
    logs = []
    for path in sorted(node_ev.logs):
        text = node_ev.logs[path]
        source = LineSource(path, node_ev.node, asked_pids, asked_hosts, when, single_node=False)
        whole = f"logs:{path}" not in cut and "output" not in cut
        logs.append(
            LogParse(
                facts=parse_log(path, text, source),
                written=bool(text.strip()),
                master_pods=bool(master_pods(text)),
                start=first_stamp(text, node_ev.collected_at) if whole else None,
            )
        )
    if step_summaries:
        _summarize_steps(logs)
    return NodeParse(
        node=node_ev.node,
        hostname=node_ev.hostname,
        status=node_ev.status,
        collected_at=node_ev.collected_at,
        when=when,
        context=scheduler_context(assigned, scheduler_log),
        ps_present=node_ev.ps is not None,
        ps_rows=ps_rows,
        ps_problems=ps_problems,
        environ_pids=sorted(node_ev.environ),
        environ_problems=environ_problems,
        processes=processes,
        pyspy_pids=sorted(node_ev.pyspy),
        gpus=parse_nvidia_smi(node_ev.nvidia_smi),
        kernel=parse_dmesg(node_ev.dmesg),
        shell_init=(shell := parse_shell_init(node_ev.shell_init))[0],
        shell_problems=shell[1],
        gpu_series=node_series(node_ev.node, node_ev.system),
        logs=logs,
        dumps=_dumps(node_ev.flight_recorder if flight_recorder else {}),
        truncated=list(node_ev.truncated),
        ncclras=node_ev.ncclras,
        # An ncclras report saved among the logs (by hand, or by a job that polls RAS) is a
        # report all the same: its layout tells, whatever the file is called.
        # In path order: however the evidence was read (a bundle's listing, the database).
        ras_texts=[
            node_ev.logs[p] for p in sorted(node_ev.logs) if _is_ras_report(node_ev.logs[p])
        ],
        asked_hosts=asked_hosts.answers(),
        asked_pids=asked_pids.answers(),
        assumed_pids=dict(rank_pids),
    )


def _dumps(files: Mapping[str, bytes]) -> list[FrDump]:
    frames: dict[tuple, dict] = {}  # a frame kept -> its one copy for the node's dumps
    dumps = [
        _compact_dump(parse_flight_recorder(path, files[path]), frames) for path in sorted(files)
    ]
    fr_shared.share_entries(dumps)
    return dumps


def _summarize_steps(logs: list[LogParse]) -> None:
    summaries = summarize_steps([entry.facts for entry in logs])
    if summaries is None:
        return
    for entry, found in zip(logs, summaries, strict=True):
        entry.steps = found
        entry.facts.steps = []


def own_rank_pids(processes: list[RankProcess], by_pid: Mapping[int, PsRow]) -> dict[int, int]:
    """pid -> rank as the node alone says: a RANK two of its processes hold is the first
    live one's (the merge applies the same rule across nodes)."""
    live: set[int] = set()
    out: dict[int, int] = {}
    for process in processes:
        if process.rank in live:
            continue
        row = by_pid.get(process.pid)
        if row is None or row.state != "Z":
            live.add(process.rank)
        out[process.pid] = process.rank
    return out


def still_holds(parse: NodeParse, hosts: Mapping[str, str], rank_pids: Mapping[int, int]) -> bool:
    """Do the answers the node's parse was given hold in the whole snapshot?"""
    if parse.asked_hosts is None or parse.asked_pids is None:
        return False
    told, asked = parse.asked_hosts, parse.asked_pids
    # In C first: each host's node and each pid's rank as the parse was told (a name or pid
    # it was told is unknown is the loop's to check).
    if not told.items() <= hosts.items():
        for host, node in told.items():
            if hosts.get(host, "") != node:
                return False
    if asked.items() <= rank_pids.items():
        return True
    return all(rank_pids.get(pid, -1) == rank for pid, rank in asked.items())


# --- the stored form ------------------------------------------------------------------------

MAX_STORED_BYTES = 64 * 1024 * 1024  # of one node's parse as JSON: past it, parsed again


def to_json(parse: NodeParse) -> dict[str, Any]:
    table, ids, dumps = fr_shared.stored(parse.dumps)
    kept = replace(parse, dumps=dumps, fr_entries=table, fr_entry_ids=ids)
    return {"version": NODE_PARSE_VERSION, "parse": codec.encode(kept, NodeParse)}


def from_json(data: object) -> NodeParse:
    """A stored parse, checked field by field; `codec.CodecError` for anything else. Read
    back joined (`joined`): the reader reads parses as their nodes come in, ahead of the
    merge."""
    if not isinstance(data, dict) or data.get("version") != NODE_PARSE_VERSION:
        raise codec.CodecError("not a node parse of this version")
    parse = codec.decode(data.get("parse"), NodeParse)
    parse.dumps = fr_shared.rebuilt(parse.fr_entries, parse.fr_entry_ids, parse.dumps)
    parse.fr_entries, parse.fr_entry_ids = [], []
    joined(parse)
    return parse


# --- the node in the merge's form -------------------------------------------------------------


def joined(parse: NodeParse) -> NodeJoin:
    """The parse's `join`, made when it has none. Every part of it depends on the parse alone,
    and a merge only copies out of it (but the states made ahead, which the first merge takes
    as its own): one join serves every merge of the parse (a provisional verdict's, then the
    final one's)."""
    if parse.join is None:
        parse.join = join_node(parse)
    return parse.join


def join_node(parse: NodeParse) -> NodeJoin:
    """What the merge does with the node's logs and rank processes when nothing outside the
    node bears on them (`ranklogs.join_logs`, `_join_processes`)."""
    logs = join_logs(parse.node, parse.logs)
    if logs is not None:
        launched = logs.launched
    else:
        launched = {}
        for entry in parse.logs:
            launched.update(entry.facts.pid_ranks)
    processes = _join_processes(parse, launched)
    others: list[StepSummary] = []
    if processes is not None:
        own = processes.env  # by rank
        others = [s for entry in parse.logs for s in entry.steps if s.rank not in own]
        _make_ahead(parse.node, processes, logs)
    return NodeJoin(
        logs=logs,
        processes=processes,
        steps_beyond=[s.rank for s in others],
        steps_of_others=others,
    )


def make_ahead_again(parses: Iterable[NodeParse]) -> None:
    """The states made ahead again for the parses a merge took them from (a first verdict's,
    on the reader while it waits): the final verdict's merge then takes its own too."""
    for parse in parses:
        join = parse.join
        if join is not None and join.processes is not None and join.processes.made_ahead is None:
            _make_ahead(parse.node, join.processes, join.logs)


def _make_ahead(node: str, processes: JoinedProcesses, logs: JoinedLogs | None) -> None:
    """The states the first merge takes (its copies of `states`, made here, ahead of the last
    node), with the node's own ranks' step summaries on them when its logs are joined: what
    the merge's `apply_joined_logs` would leave on them."""
    ahead = {state.rank: state.copy() for state in processes.states}
    if logs is not None:
        apply_step_summaries(node, [s for s in logs.steps if s.rank in ahead], ahead)
    processes.made_ahead, processes.stepped = ahead, logs is not None


def _join_processes(parse: NodeParse, launched: dict[int, int]) -> JoinedProcesses | None:
    """`snapshot_parse._join_rank_processes` for a node none of whose ranks an earlier node
    named (the merge checks that): each rank's state whole. None when two of its processes
    hold one RANK (which one keeps it is the merge's rule)."""
    node = parse.node
    by_pid = {row.pid: row for row in parse.ps_rows}
    states: list[RankState] = []
    rank_pids: dict[int, int] = {}
    env: dict[int, dict[str, str]] = {}
    world_sizes: list[int] = []
    problems: list[tuple[str, str]] = []
    started: dict[float, datetime] = {}
    for process in parse.processes:
        pid, rank = process.pid, process.rank
        if rank in env:
            return None
        state = RankState(rank, node)
        problems += process_onto(state, process, by_pid.get(pid), parse, started)
        if state.world_size:
            world_sizes.append(state.world_size)
        env[rank] = _shared_env(process.env)
        rank_pids[pid] = rank
        states.append(state)
    environ = set(parse.environ_pids)
    lines = parse.kernel
    found: SignalPart | None = SignalPart()
    if lines.links:
        found = None  # read against the snapshot's host names: the merge's
    elif lines.oom_kills or lines.xids or lines.segfaults:
        source = LineSource("dmesg.txt", node, rank_pids, {}, parse.when)
        found = signal_part(kernel_signals(node, lines, {**launched, **rank_pids}, source))
    return JoinedProcesses(
        states=states,
        rank_pids=rank_pids,
        env=env,
        world_sizes=world_sizes,
        problems=problems,
        unknown_stacks=[p for p in parse.pyspy_pids if p not in rank_pids and p not in environ],
        ranks_identified=ranks_identified(parse, environ, by_pid, rank_pids),
        kernel_signals=found,
    )


# One object for alike environments across nodes (a node's parse shares one only among its
# own ranks): a job's 32,000 ranks hold a few distinct ones, and `envdiff` reads each distinct
# object once. Bounded as the stacks' readings are; the merge and the facts never change one.
_ENVS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
_ENVS_CACHED = 4096


def _shared_env(variables: dict[str, str]) -> dict[str, str]:
    key = tuple(variables.items())
    known = _ENVS.get(key)
    if known is None:
        if len(_ENVS) >= _ENVS_CACHED:
            _ENVS.clear()
        known = _ENVS[key] = variables
    return known


def process_onto(
    state: RankState,
    process: RankProcess,
    row: PsRow | None,
    parse: NodeParse,
    started: dict[float, datetime],
) -> list[tuple[str, str]]:
    """A rank process on its rank's state (a fresh one, or one an earlier node's log lines
    named first): where it runs, its ps row, its stack; (source, problem) of each py-spy
    reader's complaint. `started`: the node's start times by elapsed seconds (a node's ranks
    mostly started together: one sum each)."""
    ppid, ps_state = (row.ppid, row.stat[:1]) if row is not None else (None, "")
    state.node = parse.node
    state.pid = process.pid
    state.ppid = ppid
    state.state = ps_state
    state.local_rank = process.local_rank
    state.world_size = process.world_size
    state.local_world_size = process.local_world_size
    state.process_seen = row is None or ps_state != "Z"  # a zombie has exited
    if row is not None and row.elapsed_s is not None and parse.collected_at is not None:
        at = started.get(row.elapsed_s)
        if at is None:
            at = started[row.elapsed_s] = parse.collected_at - timedelta(seconds=row.elapsed_s)
        state.started_at = at
    return _stack_onto(process, state)


def _stack_onto(process: RankProcess, state: RankState) -> list[tuple[str, str]]:
    """The process's py-spy window and stack on its rank's state; (source, problem) of each
    reader's complaint, in order."""
    pid = process.pid
    problems = []
    if process.sampled:
        state.window = process.window
        problems += [(f"py-spy samples {pid}", text) for text in process.sample_problems]
    if not process.dumped:
        state.stack_error = process.stack_error
        return problems
    problems += [(f"py-spy {pid}", text) for text in process.stack_problems]
    if process.stack is None:
        state.stack_error = "py-spy output had no frames"
        return problems
    state.stack = process.stack
    state.stack_signature = process.stack_signature
    state.innermost_frame = process.innermost_frame
    state.frame_name = process.frame_name
    state.frame_kind = process.frame_kind
    return problems


def ranks_identified(parse: NodeParse, environ: set[int], by_pid, rank_pids) -> bool:
    """Is every process ps listed tied to a rank or known not to be one? A process without
    its environ is unknown, unless it is a rank's parent (the launcher, a wrapper script) or
    child (a data-loader worker)."""
    if not parse.ps_present:
        return bool(environ)
    parents = {by_pid[pid].ppid for pid in rank_pids if pid in by_pid}
    return all(
        pid in environ or pid in parents or row.ppid in rank_pids for pid, row in by_pid.items()
    )


# --- one node's parts -------------------------------------------------------------------------


class _Asked(Mapping):
    """A mapping that remembers every key it was asked for and its answer."""

    def __init__(self, data: Mapping) -> None:
        self._data = data
        self._asked: dict = {}
        self._whole = False

    def __getitem__(self, key):
        value = self._data.get(key, _MISSING)
        self._asked[key] = value
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator:
        self._whole = True
        return iter(self._data)

    def __len__(self) -> int:
        self._whole = True
        return len(self._data)

    def answers(self) -> dict | None:
        if self._whole:
            return None
        missing = "" if all(isinstance(k, str) for k in self._asked) else -1
        return {k: missing if v is _MISSING else v for k, v in self._asked.items()}


def _compact_dump(dump: FrDump, frames: dict[tuple, dict]) -> FrDump:
    """Each entry keeps only the frame its call site is read from (`FrEntry.frame`), as text:
    the rest of a dump's raw frames is never read and is not plain data. `frames`: the copies
    made for the node's other dumps, one object for equal ones (entries alike are then one:
    `fr_shared.share_entries` compares frames by identity)."""
    # The pickle shares one frame dict between the entries that recorded it: each is judged
    # and copied once per dump (the copies are equal, so sharing them changes nothing).
    copies: dict[int, tuple[dict, dict]] = {}  # id -> (the frame, kept alive; its copy)
    for entry in dump.entries:
        if entry.raw_frames:
            chosen = _chosen_frame(entry.raw_frames)
            if chosen is None:
                entry.raw_frames = []
                continue
            known = copies.get(id(chosen))
            if known is None:
                copy = {k: _short(chosen[k]) for k in ("filename", "name", "line") if k in chosen}
                copy = frames.setdefault(tuple(copy.items()), copy)
                known = copies[id(chosen)] = (chosen, copy)
            entry.raw_frames = [known[1]]
    return dump


def _chosen_frame(frames: list) -> dict | None:
    # The frame `FrEntry.frame` reads (flight_recorder._call_site), found in one plain loop:
    # this runs for every entry of every dump.
    first = None
    for frame in frames:
        if type(frame) is dict or isinstance(frame, dict):
            if first is None:
                first = frame
            filename = frame.get("filename", "")
            if type(filename) is not str or len(filename) > MAX_TEXT_CHARS:
                filename = _text(filename)
            if "/torch/" not in filename:
                return frame or first  # as _call_site: an empty frame gives way to the first
    return first


def _is_ras_report(text: str) -> bool:
    head = text[:4096]
    return "Job summary" in head and "Communicators" in head and "NCCL version" in head


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


def _process(node_ev: NodeEvidence, pid: int, rank: int, variables: dict) -> RankProcess:
    local = int_or_none(variables.pop("LOCAL_RANK", None))
    world = int_or_none(variables.pop("WORLD_SIZE", None))
    local_world = int_or_none(variables.pop("LOCAL_WORLD_SIZE", None))
    process = RankProcess(
        pid=pid,
        rank=rank,
        local_rank=local,
        world_size=world,
        local_world_size=local_world,
        env=variables,
        sampled=pid in node_ev.pyspy_samples,
        window=None,
        sample_problems=[],
        dumped=pid in node_ev.pyspy,
        stack_problems=[],
        stack=None,
    )
    if process.sampled:
        process.window, process.sample_problems = parse_samples(node_ev.pyspy_samples[pid], pid)
    if not process.dumped:
        process.stack_error = node_ev.pyspy_errors.get(pid, "no py-spy dump")
        return process
    threads, process.stack_problems = parse_pyspy(node_ev.pyspy[pid])
    thread = main_thread(threads)
    if thread is None:
        return process
    stack, process.stack_signature, process.innermost_frame, process.frame_name, kind = _read_stack(
        thread.frames
    )
    process.stack, process.frame_kind = list(stack), kind
    return process


# The ranks of a job stand in a few places: one reading per distinct stack (its frames as
# values), remembered across ranks and nodes within a bound, as the py-spy reader does file names.
_STACKS: dict[tuple, tuple[tuple[str, ...], str, str, str, str]] = {}
_STACKS_CACHED = 1024
_STACK_FRAMES_CACHED = 256  # a deeper stack is read each time (its key costs what it saves)
_FRAME_VALUES = attrgetter("name", "filename", "line")
_FRAME_LINE = attrgetter("line")


def _read_stack(frames: list) -> tuple[tuple[str, ...], str, str, str, str]:
    """(the frames as text, the signature, the relevant frame as text, its name, its kind)."""
    key = None
    if len(frames) <= _STACK_FRAMES_CACHED:
        # By value, built in C; a line's type too: a JSON `"line": true` equals 1 as a key,
        # and is written "True".
        key = (tuple(map(_FRAME_VALUES, frames)), tuple(map(type, map(_FRAME_LINE, frames))))
    known = _STACKS.get(key) if key is not None else None
    if known is not None:
        return known
    frame = relevant_frame(frames)
    known = (
        tuple(str(f) for f in frames),
        stack_signature(frames),
        str(frame) if frame else "",
        frame.name if frame else "",
        frame_kind(frame),
    )
    if key is not None:
        if len(_STACKS) >= _STACKS_CACHED:
            _STACKS.clear()
        _STACKS[key] = known
    return known
