"""From raw evidence to one row per rank, plus the node-level facts the verdict needs.

How a rank is identified: a process's RANK environment variable is authoritative. Log lines give
the rank from `[rankN]` / `rank=N` / `[Rank N]`, from a torchrun `[defaultN]:` prefix (a local
rank, turned into a global one with the node's LOCAL_RANK -> RANK map), or from the file name
(`rank3.log`, `trace_rank_3`). A process without RANK (the torchrun launcher) is not a rank.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from analysis.evidence import SnapshotEvidence
from analysis.nodemap import (
    NodeParse,
    joined,
    map_node,
    process_onto,
    ranks_identified,
    scheduler_context,
    still_holds,
)
from analysis.parsers.environ import COMMS_PREFIXES
from analysis.parsers.ps import PsRow
from analysis.ranklogs import (
    apply_joined_logs,
    apply_log,
    apply_signal_progress,
    apply_step_summaries,
    fresh_for_steps,
    holds_more_than_steps,
    line_rank,
    place_comm_inits,
)
from analysis.rankmodel import (
    MAX_WORLD,
    RENDEZVOUS,
    TERMINATED_BY_LAUNCHER,
    WARMUP_STEPS,
    JoinedProcesses,
    ParsedNode,
    ParsedSnapshot,
    RankState,
)
from analysis.schedulers.attach import scheduler_log, scheduler_ranks, scheduler_world_size
from analysis.signals import LineSource
from analysis.signals.place import add_signal_part, host_map, kernel_signals, snapshot_signals
from analysis.signals.summary import SignalPart

__all__ = [
    "COMMS_PREFIXES",
    "MAX_WORLD",
    "RENDEZVOUS",
    "TERMINATED_BY_LAUNCHER",
    "WARMUP_STEPS",
    "ParsedNode",
    "ParsedSnapshot",
    "RankState",
    "extract_ranks",
    "line_rank",
    "parse_snapshot",
]


def extract_ranks(evidence: SnapshotEvidence) -> list[RankState]:
    """One RankState per rank found in the evidence, ordered by rank."""
    parsed = parse_snapshot(evidence, flight_recorder=False)
    return [parsed.ranks[r] for r in sorted(parsed.ranks)]


def parse_snapshot(
    evidence: SnapshotEvidence, flight_recorder: bool = True, scheduler_lines: bool = False
) -> ParsedSnapshot:
    """Every node parsed alone (the map, `analysis.nodemap`), then merged. `scheduler_lines`:
    the scheduler's words about each node are read as one more of its logs."""
    hosts = host_map((n.node, n.hostname) for n in evidence.nodes)

    def parse(
        index: int, rank_pids: dict[int, int] | None = None, step_summaries: bool = True
    ) -> NodeParse:
        node_ev = evidence.nodes[index]
        return map_node(
            node_ev,
            hosts=hosts,
            snapshot_collected_at=evidence.collected_at,
            assigned=scheduler_ranks(evidence.scheduler, node_ev.node, node_ev.hostname),
            scheduler_log=scheduler_log(evidence.scheduler, node_ev.node, node_ev.hostname)
            if scheduler_lines
            else None,
            rank_pids=rank_pids,
            flight_recorder=flight_recorder,
            step_summaries=step_summaries,
        )

    return merge_parses(
        [parse(i) for i in range(len(evidence.nodes))],
        expected_world_size=evidence.expected_world_size,
        collected_at=evidence.collected_at,
        scheduler=evidence.scheduler,
        scheduler_lines=scheduler_lines,
        flight_recorder=flight_recorder,
        reparse=parse,
    )


# (index, rank_pids[, step_summaries]) -> the node parsed again from its evidence
Reparse = Callable[..., NodeParse]


# Nodes merged between two asks of a caller's `keep_going` (~0.1 s of CPU at fleet scale).
KEEP_GOING_EVERY = 256


class Abandoned(Exception):
    """A caller's `keep_going` said no: the diagnosis it asked for is no longer wanted. Its
    text says where the work stopped."""


def merge_parses(
    parses: list[NodeParse],
    *,
    expected_world_size: int | None,
    collected_at: datetime | None,
    scheduler: dict | None,
    scheduler_lines: bool,
    flight_recorder: bool,
    reparse: Reparse,
    keep_going: Callable[[], bool] | None = None,
) -> ParsedSnapshot:
    """The reduce: the nodes' parses merged in node order, as one pass over the whole
    snapshot would have read them. `reparse(index, rank_pids)` parses a node again from its
    evidence, when what its parse was told no longer holds (another node's host name, a RANK
    another node holds, a scheduler's word that changed); `reparse(index, rank_pids, False)`
    with its step lines kept, when an earlier node's step lines moved one of its ranks (its
    summaries assume they start fresh). `keep_going`, when given, is asked every
    KEEP_GOING_EVERY nodes: False raises Abandoned (a first verdict whose last node came in
    meanwhile)."""
    parsed = ParsedSnapshot(
        ranks={},
        env={},
        nodes={},
        logs=[],
        watchdog=[],
        dumps=[],
        expected_world_size=None,
        problems=[],
        collected_at=collected_at or _latest(p.collected_at for p in parses),
        has_process_evidence=False,
    )
    world_sizes: list[int] = []
    # A bundle of one node: its local ranks are the global ones (the node is the whole job,
    # or the bundle would hold the others too).
    single_node = len(parses) == 1

    def problem(node: str, source: str, text: str) -> None:
        parsed.problems.append({"node": node, "source": source, "problem": text})

    hosts = host_map((p.node, p.hostname) for p in parses)
    for merged, index in enumerate(sorted(range(len(parses)), key=lambda i: parses[i].node)):
        if keep_going is not None and merged % KEEP_GOING_EVERY == 0 and not keep_going():
            raise Abandoned("in the merge")
        node_parse = parses[index]
        log = scheduler_log(scheduler, node_parse.node, node_parse.hostname)
        context = scheduler_context(
            scheduler_ranks(scheduler, node_parse.node, node_parse.hostname),
            log if scheduler_lines else None,
        )
        if node_parse.context != context or node_parse.when != (
            node_parse.collected_at or collected_at
        ):
            node_parse = reparse(index, None)
        facts, rank_pids, taken, stepped = _merge_processes(
            node_parse, parsed, world_sizes, problem
        )
        if not still_holds(node_parse, hosts, rank_pids):
            stepped = _unstep(parsed.ranks, taken, stepped)
            node_parse, taken = reparse(index, rank_pids), None
        if not _fresh_for_steps(parsed.ranks, node_parse, taken):
            stepped = _unstep(parsed.ranks, taken, stepped)
            node_parse, taken = reparse(index, rank_pids, False), None
        dumps = node_parse.dumps if flight_recorder else []
        kernel = taken.kernel_signals if taken is not None else None
        _merge_node(
            node_parse, dumps, facts, parsed, world_sizes, problem, hosts, single_node, kernel,
            stepped,
        )  # fmt: skip

    world_sizes += [fact.nranks for _, fact in parsed.comm_inits]
    expected = expected_world_size or scheduler_world_size(scheduler)
    expected = expected or (max(world_sizes) if world_sizes else None)
    expected = _bounded_world(parsed, expected)
    place_comm_inits(parsed, expected)
    for state in parsed.ranks.values():
        if state.world_size is None and expected:
            state.world_size = expected
    parsed.expected_world_size = expected
    parsed.has_process_evidence = any(f.has_process_evidence for f in parsed.nodes.values())
    parsed.signals = snapshot_signals(parsed, expected)
    parsed.mentioned.update(parsed.signals.by_rank)
    apply_signal_progress(parsed)
    return parsed


def _merge_processes(
    node_parse: NodeParse, parsed: ParsedSnapshot, world_sizes: list[int], problem
) -> tuple[ParsedNode, dict[int, int], JoinedProcesses | None, bool]:
    """The node's rank processes joined to the snapshot's ranks (a RANK a live process of an
    earlier node holds stays that one's); its ParsedNode, the node's joined processes when
    the merge took them as they are (no earlier node named any of their ranks), and whether
    the states it took carry the node's own step summaries already."""
    node, status = node_parse.node, node_parse.status
    _reading_problems(node_parse, problem)
    taken, stepped = joined(node_parse).processes, False
    if taken is not None and parsed.ranks.keys().isdisjoint(taken.env):
        rank_pids, stepped = _adopt_rank_processes(node, taken, parsed, world_sizes, problem)
        unknown_stacks, identified = taken.unknown_stacks, taken.ranks_identified
    else:
        taken = None
        by_pid: dict[int, PsRow] = {row.pid: row for row in node_parse.ps_rows}
        rank_pids = _join_rank_processes(node_parse, by_pid, parsed, world_sizes, problem)
        environ = set(node_parse.environ_pids)
        unknown_stacks = [
            pid for pid in node_parse.pyspy_pids if pid not in rank_pids and pid not in environ
        ]  # not a rank, nor a non-rank process (launcher) that was dumped too
        identified = ranks_identified(node_parse, environ, by_pid, rank_pids)
    for pid in unknown_stacks:
        problem(node, f"py-spy {pid}", "stack without an environment: rank unknown")
    _join_gpus(node_parse, parsed.ranks, rank_pids, problem)
    for text in node_parse.kernel.problems:
        problem(node, "dmesg", text)
    for text in node_parse.shell_problems:
        problem(node, "shell start-up files", text)
    facts = ParsedNode(
        node=node,
        hostname=node_parse.hostname,
        status=status,
        collected_at=node_parse.collected_at,
        has_process_evidence=node_parse.ps_present or bool(node_parse.environ_pids),
        ranks_identified=identified,
        kernel=node_parse.kernel,
        gpus=node_parse.gpus,
        shell_init=node_parse.shell_init,
        rank_pids=rank_pids,
        gpu_series=node_parse.gpu_series,
    )
    return facts, rank_pids, taken, stepped


def _adopt_rank_processes(
    node: str, taken: JoinedProcesses, parsed: ParsedSnapshot, world_sizes: list[int], problem
) -> tuple[dict[int, int], bool]:
    """`_join_rank_processes` for ranks no earlier node named: each state a copy of the one
    the node's join made (the join serves every merge of the parse, and the merge's later
    steps change the states), the copies made ahead for the first merge, which takes them.
    Whether they carry the node's own step summaries."""
    made, taken.made_ahead = taken.made_ahead, None
    if made is not None:
        parsed.ranks.update(made)  # in C, in process order
    else:
        ranks = parsed.ranks
        for state in taken.states:
            ranks[state.rank] = state.copy()
    parsed.env.update(taken.env)
    world_sizes += taken.world_sizes
    for source, text in taken.problems:
        problem(node, source, text)
    return dict(taken.rank_pids), made is not None and taken.stepped


def _unstep(ranks: dict[int, RankState], taken: JoinedProcesses | None, stepped: bool) -> bool:
    """A node parsed again, whose states were taken with its step summaries on them (its
    new parse's logs move them, and ask whether anything did): their step fields as a fresh
    state holds them. False: the states carry no step summaries now."""
    if stepped and taken is not None:
        for rank in taken.env:
            state = ranks[rank]
            state.last_step = state.last_step_at = state.step_time = state.log_period = None
    return False


def _fresh_for_steps(
    ranks: dict[int, RankState], node_parse: NodeParse, taken: JoinedProcesses | None
) -> bool:
    """`fresh_for_steps`; when the node's own processes were adopted (fresh states), only for
    the ranks its logs' step summaries name beyond them."""
    if taken is None:
        return fresh_for_steps(ranks, node_parse.logs)
    for rank in joined(node_parse).steps_beyond:
        state = ranks.get(rank)
        if state is not None and (state.last_step is not None or state.last_step_at is not None):
            return False
    return True


def _reading_problems(node_parse: NodeParse, problem) -> None:
    """What stopped the node's evidence short, and what its ps and environ readers refused."""
    node, status = node_parse.node, node_parse.status
    if not status.gathered:
        problem(node, "node", f"no evidence: {status.note}")
    elif status.partial:
        problem(node, "node", f"evidence stopped short (what came is read): {status.note}")
    for text in node_parse.ps_problems:
        problem(node, "ps", text)
    for pid, text in node_parse.environ_problems:
        problem(node, f"environ {pid}", text)


def _join_rank_processes(
    node_parse: NodeParse,
    by_pid: dict[int, PsRow],
    parsed: ParsedSnapshot,
    world_sizes: list[int],
    problem,
) -> dict[int, int]:
    """Each of the node's rank processes (its environ's RANK) as its rank's state, with its ps
    row and stack; the rank of each pid taken."""
    node, ranks = node_parse.node, parsed.ranks
    rank_pids: dict[int, int] = {}
    started: dict[float, datetime] = {}  # a node's ranks mostly started together: one sum each
    for process in node_parse.processes:
        pid, rank = process.pid, process.rank
        state = ranks.get(rank)
        if state is not None and state.process_seen:
            problem(node, f"environ {pid}", f"RANK={rank} also held by pid {state.pid}")
            continue
        if state is None:  # most ranks
            state = ranks[rank] = RankState(rank, node)
        # else: a rank an earlier node's log lines named first
        problems = process_onto(state, process, by_pid.get(pid), node_parse, started)
        if state.world_size:
            world_sizes.append(state.world_size)
        parsed.env[rank] = process.env
        rank_pids[pid] = rank
        for source, text in problems:
            problem(node, source, text)
    return rank_pids


def _join_gpus(
    node_parse: NodeParse, ranks: dict[int, RankState], rank_pids: dict[int, int], problem
) -> None:
    """nvidia-smi's processes joined to the ranks by pid: each rank's GPU, its use and memory."""
    gpus = node_parse.gpus
    for text in gpus.problems:
        problem(node_parse.node, "nvidia-smi", text)
    by_index = {gpu.index: gpu for gpu in gpus.gpus}
    for gpu_process in gpus.processes:
        rank = rank_pids.get(gpu_process.pid)
        if rank is not None and gpu_process.gpu in by_index:
            state = ranks[rank]
            state.gpu = gpu_process.gpu
            state.gpu_util = by_index[gpu_process.gpu].utilization
            state.gpu_memory_mib = gpu_process.memory_mib


def _merge_node(
    node_parse: NodeParse,
    dumps: list,
    facts: ParsedNode,
    parsed: ParsedSnapshot,
    world_sizes: list[int],
    problem,
    hosts: dict[str, str],
    single_node: bool,
    kernel_found: SignalPart | None = None,
    stepped: bool = False,
) -> None:
    """The node's logs, dumps and kernel lines applied to the snapshot's ranks.
    `kernel_found`: the kernel lines' signals as the node's join read them, when it holds;
    `stepped`: its own ranks' states carry its step summaries already."""
    node = node_parse.node
    parsed.nodes[node] = facts
    join = joined(node_parse)
    ready = join.logs
    if ready is not None:  # every line names its rank: the node's lists as they are
        steps = join.steps_of_others if stepped else ready.steps
        launched = apply_joined_logs(node, ready, parsed, world_sizes, problem, steps)
    else:
        launched = _merge_logs(node_parse, facts, parsed, world_sizes, problem, single_node)
    for dump in dumps:
        for text in dump.problems:
            problem(node, dump.path, text)
        if dump.entries or not dump.problems:
            parsed.dumps.append(dump)
    for name in node_parse.truncated:
        problem(node, name, "cut at the size cap: its head is missing")
    facts.log_pids = launched
    lines = facts.kernel
    if kernel_found is not None:
        add_signal_part(parsed, kernel_found)
    elif lines.oom_kills or lines.xids or lines.segfaults or lines.links:  # most nodes: none
        kernel = LineSource("dmesg.txt", node, facts.rank_pids, hosts, node_parse.when)
        pids = {**launched, **facts.rank_pids}
        parsed.raw_signals += kernel_signals(node, lines, pids, kernel)
    if node_parse.ncclras:
        parsed.ras_outputs.append((node, node_parse.ncclras))
    parsed.ras_outputs += [(node, text) for text in node_parse.ras_texts]


def _merge_logs(
    node_parse: NodeParse,
    facts: ParsedNode,
    parsed: ParsedSnapshot,
    world_sizes: list[int],
    problem,
    single_node: bool,
) -> dict[int, int]:
    """The node's logs on the snapshot's ranks, one at a time, their lines' local ranks
    resolved through the node's LOCAL_RANK map and its launchers' maps; pid -> rank, as its
    launchers' lines say."""
    node = node_parse.node
    local_to_global = None  # made for the first log that needs it: most logs do not
    launched: dict[int, int] = {}
    for entry in node_parse.logs:
        log = entry.facts
        parsed.logs.append((node, log))
        if log.file_rank is not None and entry.written:
            parsed.mentioned.add(log.file_rank)  # a rank that wrote any line was observed
        if entry.master_pods:
            parsed.mentioned.add(0)  # a PyTorchJob's master pod, listed, is its rank 0
        for text in log.problems:
            problem(node, log.path, text)
        if log.world_size:
            world_sizes.append(log.world_size)
        if holds_more_than_steps(log):
            parsed.logs_of_note.append((node, log))
            if local_to_global is None:
                local_to_global = _local_to_global(facts, parsed.ranks)
            apply_log(node, log, local_to_global, facts, parsed, problem, single_node, entry.steps)
        elif entry.steps:
            apply_step_summaries(node, entry.steps, parsed.ranks)
        if not parsed.step_lines and (log.steps or entry.steps):
            parsed.step_lines = True
        if log.pid_ranks:
            launched.update(log.pid_ranks)
        if entry.start:
            parsed.log_starts.append(entry.start)
    return launched


def _local_to_global(facts: ParsedNode, ranks: dict[int, RankState]) -> dict[int, int]:
    """The node's LOCAL_RANK -> RANK, as its rank processes' environments say."""
    return {
        ranks[rank].local_rank: rank
        for rank in facts.rank_pids.values()
        if ranks[rank].local_rank is not None
    }


def _bounded_world(parsed: ParsedSnapshot, claimed: int | None) -> int | None:
    """A world size or rank number is a claim of the evidence (a manifest, WORLD_SIZE, a log
    line), and the analysis is linear in it: past MAX_WORLD ranks it is not believed."""
    ranks = parsed.ranks
    huge = []
    if ranks and not 0 <= min(ranks) <= max(ranks) < MAX_WORLD:  # in C: mostly none
        huge = [rank for rank in ranks if not 0 <= rank < MAX_WORLD]
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
