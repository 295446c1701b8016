"""From raw evidence to one row per rank, plus the node-level facts the verdict needs.

How a rank is identified: a process's RANK environment variable is authoritative. Log lines give
the rank from `[rankN]` / `rank=N` / `[Rank N]`, from a torchrun `[defaultN]:` prefix (a local
rank, turned into a global one with the node's LOCAL_RANK -> RANK map), or from the file name
(`rank3.log`, `trace_rank_3`). A process without RANK (the torchrun launcher) is not a rank.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.gpushape import node_series
from analysis.jobtime import first_stamp
from analysis.parsers.dmesg import KernelFacts, parse_dmesg
from analysis.parsers.environ import COMMS_PREFIXES, int_or_none, parse_environ_subset
from analysis.parsers.flight_recorder import parse_flight_recorder
from analysis.parsers.logs import (
    parse_log,
)
from analysis.parsers.nvidia_smi import GpuFacts, parse_nvidia_smi
from analysis.parsers.ps import PsRow, parse_ps
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.parsers.pyspy_samples import parse_samples
from analysis.parsers.shell_init import ShellInitSetting, parse_shell_init
from analysis.ranklogs import apply_log, apply_signal_progress, line_rank, place_comm_inits
from analysis.rankmodel import (
    MAX_WORLD,
    RENDEZVOUS,
    TERMINATED_BY_LAUNCHER,
    WARMUP_STEPS,
    NodeFacts,
    ParsedSnapshot,
    RankState,
)
from analysis.schedulers.attach import scheduler_ranks, scheduler_world_size
from analysis.signals import LineSource
from analysis.signals.place import host_map, kernel_signals, snapshot_signals
from analysis.signals.who import master_pods
from analysis.stacks import frame_kind, relevant_frame, stack_signature

__all__ = [
    "COMMS_PREFIXES",
    "MAX_WORLD",
    "RENDEZVOUS",
    "TERMINATED_BY_LAUNCHER",
    "WARMUP_STEPS",
    "NodeFacts",
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
        launched: dict[int, int] = {}  # pid -> rank, as this node's launchers' lines say
        for path in sorted(node_ev.logs):
            source = LineSource(path, node_ev.node, facts.rank_pids, hosts, when, single_node=False)
            log = parse_log(path, node_ev.logs[path], source)
            parsed.logs.append((node_ev.node, log))
            if log.file_rank is not None and node_ev.logs[path].strip():
                parsed.mentioned.add(log.file_rank)  # a rank that wrote any line was observed
            if master_pods(node_ev.logs[path]):
                parsed.mentioned.add(0)  # a PyTorchJob's master pod, listed, is its rank 0
            for text in log.problems:
                problem(node_ev.node, path, text)
            if log.world_size:
                world_sizes.append(log.world_size)
            apply_log(node_ev.node, log, local_to_global, facts, parsed, problem, single_node)
            launched.update(log.pid_ranks)
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
        facts.log_pids = launched
        pids = {**launched, **facts.rank_pids}
        parsed.raw_signals += kernel_signals(node_ev.node, facts.kernel, pids, kernel)
        if node_ev.ncclras:
            parsed.ras_outputs.append((node_ev.node, node_ev.ncclras))
        # An ncclras report saved among the logs (by hand, or by a job that polls RAS) is a
        # report all the same: its layout tells, whatever the file is called.
        parsed.ras_outputs += [
            (node_ev.node, text) for text in node_ev.logs.values() if _is_ras_report(text)
        ]

    world_sizes += [fact.nranks for _, fact in parsed.comm_inits]
    expected = evidence.expected_world_size or scheduler_world_size(evidence.scheduler)
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


def _is_ras_report(text: str) -> bool:
    head = text[:4096]
    return "Job summary" in head and "Communicators" in head and "NCCL version" in head


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
    wanted = RENDEZVOUS | {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"}
    wanted |= SLURM_TASK_VARIABLES
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
        state.local_world_size = int_or_none(variables.pop("LOCAL_WORLD_SIZE", None))
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
        gpu_series=node_series(node, node_ev.system),
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
