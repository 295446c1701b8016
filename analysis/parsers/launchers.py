"""What training launchers and frameworks print when a rank leaves, and how they number ranks.

Covers torchrun / TorchElastic, DeepSpeed's launcher, Ray Train, Slurm's srun and slurmstepd,
Open MPI's mpirun, torch.multiprocessing.spawn, PyTorch Lightning, Megatron and plain Python or
shell fatal errors. Each `*_exit*` function reads ONE line and returns facts about it; the few
reports that span several lines (torchrun's failure summary and rendezvous result, Open MPI's
"first process to do so" block, Ray Train's per-rank error list) are followed by `LauncherReader`,
which keeps the little state they need and every table it fills bounded.

What the launchers' own source says, and the lines cannot tell apart by themselves:
- torchrun's "Root Cause (first observed failure)" is the failure whose error file or exit was
  seen first, not necessarily the cause; ranks torchrun stopped itself show as SIGTERM (and, 30 s
  later, SIGKILL) entries in the same summary.
- DeepSpeed's `... exits with return code = N` prints the command of the LAST process it spawned,
  so its `--local_rank=K` names the last local rank, not the one that failed (deepspeed/launcher/
  launch.py builds `cmd` in its spawn loop and logs that variable). Its "Killing subprocess PID"
  lines list every local process, the one that already died included.
- srun's "task N" is Slurm's task id: the global rank when srun starts one task per rank, the node
  index when srun starts one launcher (torchrun, deepspeed) per node.

Every regular expression here is linear by construction: literal anchors or substring checks come
first, repetitions are single character classes with no nested quantifier, and no two adjacent
repetitions can match the same text, so a 1 MB line costs one pass.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime


@dataclass
class ExitFact:
    """A rank (or a process) that left, as a launcher, a framework or the process itself says.

    Re-exported by `analysis.parsers.logs`, where readers import it from. `exit_code` keeps the
    launcher's convention: negative signal numbers from Python launchers (-9), 128 + signal from
    shells (137), None when the wording gives no code. `at` is the time the report carries
    (torchrun's summary), read as UTC like every other log time here.
    """

    rank: int | None  # global rank, when the line (or its block) says so
    local_rank: int | None
    pid: int | None
    exit_code: int | None
    line: str
    launcher: str = ""  # torchrun deepspeed ray slurm mpirun spawn lightning megatron python shell
    host: str | None = None
    first_observed: bool = False  # torchrun's "Root Cause (first observed failure)" entry
    stopped_by_launcher: bool = False  # the launcher stopped it because another rank failed
    at: datetime | None = None


MAX_MAP = 65_536  # entries kept in any rank map: 4,096 ranks with room to spare
MAX_EXITS = 16_384  # exit facts kept per log: the first half and the latest half

SIGNAL_CODES = {
    "SIGHUP": -1,
    "SIGINT": -2,
    "SIGQUIT": -3,
    "SIGILL": -4,
    "SIGTRAP": -5,
    "SIGABRT": -6,
    "SIGBUS": -7,
    "SIGFPE": -8,
    "SIGKILL": -9,
    "SIGUSR1": -10,
    "SIGSEGV": -11,
    "SIGUSR2": -12,
    "SIGPIPE": -13,
    "SIGALRM": -14,
    "SIGTERM": -15,
}
# strsignal(3) wording, as srun and shells print it.
STRSIGNAL_CODES = {
    "Hangup": -1,
    "Interrupt": -2,
    "Quit": -3,
    "Illegal instruction": -4,
    "Trace/breakpoint trap": -5,
    "Aborted": -6,
    "Bus error": -7,
    "Floating point exception": -8,
    "Killed": -9,
    "User defined signal 1": -10,
    "Segmentation fault": -11,
    "User defined signal 2": -12,
    "Broken pipe": -13,
    "Alarm clock": -14,
    "Terminated": -15,
}

# torchrun / TorchElastic (torch/distributed/elastic/multiprocessing/api.py, agent/server/api.py)
_TR_FAILED = re.compile(
    r"failed \(exitcode: (-?\d{1,18})\) local_rank: (\d{1,18}) \(pid: (\d{1,18})\)"
)
_TR_CLOSING = re.compile(r"Sending process (\d{1,18}) closing signal (SIG[A-Z]+)")
_TR_CLOSING_NEW = re.compile(r"Closing process (\d{1,18}) via signal (SIG[A-Z]+)")
_TR_DEATH = re.compile(r"Received (\d{1,3}|Signals\.SIG[A-Z]+|SIG[A-Z]+) death signal")
_SUMMARY_ENTRY = re.compile(r"^\s*\[(\d{1,18})\]:\s*$")
_SUMMARY_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_SUMMARY_RANK = re.compile(r"^(\d{1,18}) \(local_rank: (\d{1,18})\)")
_SUMMARY_EXIT = re.compile(r"^(-?\d{1,18}) \(pid: (\d{1,18})\)")
_SUMMARY_TIME = re.compile(r"^(\d{4})-(\d\d)-(\d\d)_(\d\d):(\d\d):(\d\d)")
_INT_LIST = re.compile(r"\[([\d, ]*)\]")
_GROUP_RANK = re.compile(r"g(?<!\wg)roup_rank=(\d{1,18})")

# DeepSpeed (deepspeed/launcher/launch.py)
_DS_EXIT = re.compile(r"exits with return code = (-?\d{1,18})")
_DS_KILLING = re.compile(r"Killing subprocess (\d{1,18})")
_DS_NODE = re.compile(r"nnodes=(\d{1,18}), num_local_procs=(\d{1,18}), node_rank=(\d{1,18})")
_DS_MAPPING_ENTRY = re.compile(r"'([^']{1,255})': \[([\d, ]*)\]")
_DS_SPAWNED = re.compile(r"process (\d{1,18}) spawned with command:")
_PDSH_PREFIX = re.compile(r"([\w.-]{1,255}): \[")
_DS_LOCAL_ARG = re.compile(r"'--local_rank=(\d{1,18})'")

# Ray Train (ray/train/_internal/utils.py, backend_executor.py, v2 worker_group/poll.py)
_RAY_FAILED = re.compile(r"W(?<!\wW)orker (\d{1,18}) has failed\.")
_RAY_WORKER = re.compile(
    r"i(?<!\wi)p=([\w.:-]{1,255}), pid=(\d{1,18})\) (?:world_)?rank=(\d{1,18}), "
    r"local_rank=(\d{1,18}), node_rank=(\d{1,18})"
)
_RAY_RANKS = re.compile(r"^\[Rank ([\d, ]+)(?: Error Snippet)?\]:$")
_RAY_DIED_PID = re.compile(r"\bWorker PID: (\d{1,18})")
_RAY_DIED_IP = re.compile(r"\bWorker IP address: ([\w.:-]{1,255})")

# Slurm (src/srun/launch.c _task_finish, slurmstepd)
_SRUN_TASK = re.compile(r"srun: error: (\S{1,255}): tasks? ([\d,-]{1,100000}): (.{1,200})$")
_SRUN_EXITED = re.compile(r"^Exited with exit code (\d{1,18})")
_SLURM_CANCELLED = re.compile(r"\*\*\* (?:STEP|JOB) [\w.]+ ON (\S+) CANCELLED AT")
_SLURM_OOM = re.compile(r"Detected (\d{1,18}) oom[-_]kill events?")

# Open MPI / PRRTE
_MPI_NOTICED = re.compile(
    r"noticed that process rank (\d{1,18}) with PID (\d{1,18}) on node (\S+) "
    r"exited on signal (\d{1,18})"
)
_MPI_PROCESS = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d{1,18})\]")
_MPI_EXIT = re.compile(r"Exit code:\s*(-?\d{1,18})")

# torch.multiprocessing.spawn
_SPAWN_EXIT = re.compile(
    r"[Pp]rocess (\d{1,18}) terminated with (?:exit code (-?\d{1,18})|signal (SIG[A-Z]+))"
)
_SPAWN_CLOSING = re.compile(r"Terminating process (\d{1,18}) via signal (SIG[A-Z]+)")

# PyTorch Lightning (lightning/fabric/strategies/launchers/subprocess_script.py)
_LIGHTNING = re.compile(
    r"\[rank: (\d{1,18})\] Child process with PID (\d{1,18}) terminated with code (-?\d{1,18})"
)

# Megatron (param_and_grad_buffer.py before 0.9, rerun_state_machine.py after)
_MEGATRON_NAN = re.compile(r"\bRank (\d{1,18}): found NaN in local grad norm")
_MEGATRON_NAN_NODE = re.compile(r"\bnode: (\S+)$")
_MEGATRON_RESULT = re.compile(
    r"Error: Rank (\d{1,18}), node (\S+), device \d+, iteration #?\d+: Unexpected"
)

# Python and shell
_FATAL_PYTHON = re.compile(r"Fatal Python error: ([A-Za-z ]{1,40})")
_RANK_IN_WHAT = re.compile(r"\bRank (\d{1,18})\]")
_SHELL_JOB = re.compile(
    r": line \d+: +(\d{1,18}) ([A-Z][a-z]+(?: [a-z]+)?)(?: +\(core dumped\))?(?: |$)"
)
_SHELL_BARE = {
    f"{text}{suffix}": code
    for text, code in STRSIGNAL_CODES.items()
    for suffix in ("", " (core dumped)")
}


def signal_code(name: str) -> int | None:
    """`SIGKILL` / `Signals.SIGKILL` / `9` / `Killed` -> the negative code a launcher prints."""
    name = name.strip().removeprefix("Signals.")
    if name.isdecimal():  # "²".isdigit() too, and int() refuses it
        return -int(name) if len(name) <= 3 else None
    return SIGNAL_CODES.get(name) or STRSIGNAL_CODES.get(name.removesuffix(" (core dumped)"))


def int_list(text: str, limit: int = MAX_MAP) -> list[int]:
    """`0, 1, 2` -> [0, 1, 2], at most `limit` numbers."""
    values: list[int] = []
    for part in text.split(",", limit):
        part = part.strip()
        if part.isdecimal() and len(part) <= 18:
            values.append(int(part))
        if len(values) >= limit:
            break
    return values


def task_ids(spec: str, limit: int = MAX_MAP) -> list[int]:
    """Slurm's bitmap format `0-57,59-63` -> task ids, at most `limit` of them."""
    ids: list[int] = []
    for part in spec.split(",", limit):
        first, _, last = part.partition("-")
        if not first.isdecimal() or (last and not last.isdecimal()) or len(part) > 37:
            continue
        stop = int(last) if last else int(first)
        ids.extend(range(int(first), min(stop, int(first) + limit - len(ids) - 1) + 1))
        if len(ids) >= limit:
            break
    return ids


# ---------------------------------------------------------------------------------------------
# Single-line readers. Each checks a literal before its expression.


def _stopped_by_launcher(match: re.Match, line: str, launcher: str) -> ExitFact:
    """A process its launcher stopped with a signal (the match's pid and signal name): a rank
    the launcher tore down after another failed, not a cause."""
    pid, signal = int(match.group(1)), signal_code(match.group(2))
    return ExitFact(None, None, pid, signal, line, launcher=launcher, stopped_by_launcher=True)


def torchrun_exit(line: str) -> ExitFact | None:
    """`failed (exitcode: -9) local_rank: 3 (pid: 812917) of binary: ...` and the SIGTERMs
    torchrun sends the other workers once one failed."""
    if "failed (exitcode:" in line:
        match = _TR_FAILED.search(line)
        if match:
            return ExitFact(
                None,
                int(match.group(2)),
                int(match.group(3)),
                int(match.group(1)),
                line,
                launcher="torchrun",
            )
    if "closing signal" in line or "Closing process" in line:
        match = _TR_CLOSING.search(line) or _TR_CLOSING_NEW.search(line)
        if match:
            return _stopped_by_launcher(match, line, "torchrun")
    return None


def deepspeed_exit(line: str, num_local_procs: int | None = None) -> ExitFact | None:
    """DeepSpeed's launcher: the return code, and each subprocess it tears down."""
    if "exits with return code" in line:
        match = _DS_EXIT.search(line)
        if match:
            # The logged command is the last one spawned: its --local_rank names the failed
            # process only when there was a single one.
            local = 0 if num_local_procs == 1 else None
            return ExitFact(None, local, None, int(match.group(1)), line, launcher="deepspeed")
    if "Killing subprocess" in line:
        match = _DS_KILLING.search(line)
        if match:
            # Not marked stopped_by_launcher: the list includes the process that failed.
            return ExitFact(None, None, int(match.group(1)), None, line, launcher="deepspeed")
    return None


def ray_exit(line: str) -> ExitFact | None:
    """Ray Train's `Worker 3 has failed.` and raylet's `A worker died or was killed ...`."""
    if "has failed." in line:
        match = _RAY_FAILED.search(line)
        if match:
            return ExitFact(int(match.group(1)), None, None, None, line, launcher="ray")
    if "Worker PID:" in line and "died" in line:
        pid = _RAY_DIED_PID.search(line)
        if pid:
            ip = _RAY_DIED_IP.search(line)
            return ExitFact(
                None,
                None,
                int(pid.group(1)),
                None,
                line,
                launcher="ray",
                host=ip.group(1) if ip else None,
            )
    return None


def slurm_exits(line: str) -> list[ExitFact]:
    """`srun: error: node-17: tasks 4-7: Killed` -> one fact per task (the task id as rank)."""
    if "srun: error:" not in line or "task" not in line:
        return []
    match = _SRUN_TASK.search(line)
    if not match:
        return []
    state = match.group(3).strip()
    exited = _SRUN_EXITED.match(state)
    if exited:
        code: int | None = int(exited.group(1))
    elif state.startswith("Out Of Memory"):
        code = -9  # the cgroup OOM killer's SIGKILL
    else:
        code = signal_code(state)
    host = match.group(1)
    return [
        ExitFact(task, None, None, code, line, launcher="slurm", host=host)
        for task in task_ids(match.group(2))
    ]


def slurm_step_exit(line: str) -> ExitFact | None:
    """slurmstepd's step cancellation and cgroup OOM reports (no task named)."""
    if "CANCELLED AT" in line:
        match = _SLURM_CANCELLED.search(line)
        if match:
            return ExitFact(
                None,
                None,
                None,
                None,
                line,
                launcher="slurm",
                host=match.group(1),
                stopped_by_launcher=True,
            )
    if "oom" in line and "Detected" in line:
        match = _SLURM_OOM.search(line)
        if match and int(match.group(1)) > 0:
            return ExitFact(None, None, None, -9, line, launcher="slurm")
    return None


def mpirun_exit(line: str) -> ExitFact | None:
    """`mpirun noticed that process rank 7 with PID 0 on node X exited on signal 9 (Killed).`"""
    if "noticed that process rank" not in line:
        return None
    match = _MPI_NOTICED.search(line)
    if not match:
        return None
    pid = int(match.group(2))
    return ExitFact(
        int(match.group(1)),
        None,
        pid or None,
        -int(match.group(4)),
        line,
        launcher="mpirun",
        host=match.group(3),
    )


def spawn_exit(line: str) -> ExitFact | None:
    """torch.multiprocessing.spawn: `process 0 terminated with signal SIGKILL` (the index is
    the local rank) and the SIGTERMs it sends the others."""
    if "terminated with" in line:
        match = _SPAWN_EXIT.search(line)
        if match:
            code = int(match.group(2)) if match.group(2) else signal_code(match.group(3))
            return ExitFact(None, int(match.group(1)), None, code, line, launcher="spawn")
    if "Terminating process" in line:
        match = _SPAWN_CLOSING.search(line)
        if match:
            return _stopped_by_launcher(match, line, "spawn")
    return None


def lightning_exit(line: str) -> ExitFact | None:
    """`[rank: 1] Child process with PID 2053468 terminated with code 1. Forcefully ...`: the
    rank in brackets is the child's local rank."""
    if "Child process with PID" not in line:
        return None
    match = _LIGHTNING.search(line)
    if not match:
        return None
    return ExitFact(
        None,
        int(match.group(1)),
        int(match.group(2)),
        int(match.group(3)),
        line,
        launcher="lightning",
    )


def megatron_exit(line: str) -> ExitFact | None:
    """Megatron's fatal NaN checks, which name the global rank and the node."""
    if "found NaN in local grad norm" in line:
        match = _MEGATRON_NAN.search(line)
        if match:
            node = _MEGATRON_NAN_NODE.search(line)
            return _megatron_rank(int(match.group(1)), line, node.group(1) if node else None)
    if "Unexpected result" in line and "Error: Rank" in line:
        match = _MEGATRON_RESULT.search(line)
        if match:
            return _megatron_rank(int(match.group(1)), line, match.group(2))
    return None


def _megatron_rank(rank: int, line: str, host: str | None) -> ExitFact:
    """A rank Megatron's own check stopped, as it names it (no pid, local rank or code)."""
    return ExitFact(rank, None, None, None, line, launcher="megatron", host=host)


def python_exit(line: str, rank: int | None = None, local: int | None = None) -> ExitFact | None:
    """A process's own last words: `Fatal Python error: Segmentation fault`, `terminate called
    after throwing an instance of ...` (std::terminate aborts: SIGABRT). `rank` / `local` are
    the reporter's, when the log says who wrote the line."""
    if "Fatal Python error:" in line:
        match = _FATAL_PYTHON.search(line)
        code = signal_code(match.group(1).strip()) if match else None
        if code is not None:
            return ExitFact(rank, local, None, code, line, launcher="python")
        return None
    if "terminate called after throwing" in line or "terminate called without" in line:
        what = _RANK_IN_WHAT.search(line) if rank is None else None
        return ExitFact(
            int(what.group(1)) if what else rank, local, None, -6, line, launcher="python"
        )
    return None


def shell_exit(line: str) -> ExitFact | None:
    """What a shell prints when its child died of a signal: `Killed` alone on a line, or
    `/path/script: line 28:  8156 Killed    python3 main.py` (exit status 128 + signal)."""
    stripped = line.strip()
    code = _SHELL_BARE.get(stripped)
    if code is not None:
        return ExitFact(None, None, None, 128 - code, line, launcher="shell")
    if ": line " in line:
        match = _SHELL_JOB.search(line)
        if match:
            signal = STRSIGNAL_CODES.get(match.group(2))
            if signal is not None:
                return ExitFact(
                    None, None, int(match.group(1)), 128 - signal, line, launcher="shell"
                )
    return None


# Substrings of every guard the handlers below test while none of them waits for a next line
# (`failed (exitcode:` holds "ail", `Killing subprocess` "rocess", `global_rank_mapping=`
# "_rank", ...): a line without any of them, and not a shell's bare signal line, is none of
# theirs. Most lines of a log are not: one short loop instead of every handler in turn.
_REPORT_KEYS = (
    "ail",
    "rocess",
    "exit",
    "signal",
    "_rank",
    "]:",
    "PID",
    "terminat",
    "srun: ",
    "num_local_procs=",
    "Rendezvous",
    "command",
    "CANCELLED",
    "Detected",
    "NaN",
    "Unexpected",
    ": line ",
    "Fatal",
)


def _may_report(line: str) -> bool:
    for key in _REPORT_KEYS:  # a plain loop: any() of a generator costs more
        if key in line:
            return True
    return line.strip() in _SHELL_BARE


_SINGLE_LINE = (  # torchrun_exit is tried by LauncherReader._torchrun, before these
    ray_exit,
    slurm_step_exit,
    mpirun_exit,
    spawn_exit,
    lightning_exit,
    megatron_exit,
    shell_exit,
)


# ---------------------------------------------------------------------------------------------
# Rank maps


@dataclass
class RankMap:
    """local rank -> global rank, host -> global ranks, pid -> global rank; bounded, and a
    local rank two reports map to different global ranks is dropped (a log holding several
    nodes' launchers cannot place `[defaultN]` lines by itself)."""

    local_to_global: dict[int, int] = field(default_factory=dict)
    host_ranks: dict[str, list[int]] = field(default_factory=dict)
    pid_ranks: dict[int, int] = field(default_factory=dict)
    _ambiguous: set[int] = field(default_factory=set)

    def pair(self, local: int, rank: int) -> None:
        if local in self._ambiguous:
            return
        known = self.local_to_global.get(local)
        if known is None:
            if len(self.local_to_global) < MAX_MAP:
                self.local_to_global[local] = rank
        elif known != rank:
            del self.local_to_global[local]
            if len(self._ambiguous) < MAX_MAP:
                self._ambiguous.add(local)

    def host(self, host: str, ranks: list[int]) -> None:
        if host in self.host_ranks or len(self.host_ranks) < MAX_MAP:
            self.host_ranks[host] = ranks[:MAX_MAP]

    def host_add(self, host: str, rank: int) -> None:
        ranks = self.host_ranks.get(host)
        if ranks is None:
            if len(self.host_ranks) >= MAX_MAP:
                return
            ranks = self.host_ranks[host] = []
        if rank not in ranks and len(ranks) < MAX_MAP:
            ranks.append(rank)

    def pid(self, pid: int, rank: int) -> None:
        if pid in self.pid_ranks or len(self.pid_ranks) < MAX_MAP:
            self.pid_ranks[pid] = rank


# ---------------------------------------------------------------------------------------------
# Multi-line reports


@dataclass
class _SummaryEntry:
    first_observed: bool
    at: datetime | None = None
    host: str | None = None
    rank: int | None = None
    local: int | None = None
    code: int | None = None
    pid: int | None = None
    lines: list[str] = field(default_factory=list)


def _summary_time(text: str) -> datetime | None:
    match = _SUMMARY_TIME.match(text.strip())
    if not match:
        return None
    try:
        return datetime(*(int(g) for g in match.groups()), tzinfo=UTC)  # type: ignore[misc]
    except ValueError:
        return None


class _Capped:
    """The first half and the latest half of a stream of facts."""

    def __init__(self, limit: int) -> None:
        self.head: list[ExitFact] = []
        self.tail: deque[ExitFact] = deque(maxlen=limit - limit // 2)
        self.half = limit // 2

    def add(self, fact: ExitFact) -> None:
        if len(self.head) < self.half:
            self.head.append(fact)
        else:
            self.tail.append(fact)

    def items(self) -> list[ExitFact]:
        return self.head + list(self.tail)


class LauncherReader:
    """Feeds every line of one log; collects exit facts and rank maps.

    `feed(line, rank, local)` takes the rank and local rank the log reader already resolved for
    the line (from a `[rankN]` / `[defaultN]` prefix or the file name): they are used only for a
    process's own fatal-error lines, never for a launcher's report about someone else.
    """

    def __init__(self) -> None:
        self.map = RankMap()
        self._exits = _Capped(MAX_EXITS)
        self._entry: _SummaryEntry | None = None
        # "failures" | "root" | "cut" (quoted from its middle) while in torchrun's summary
        self._section: str | None = None
        self._block: list[_SummaryEntry] = []
        self._death_signal = False
        self._rdzv: dict[str, object] | None = None
        self._ds_node_rank: int | None = None
        self._ds_local_procs: int | None = None
        self._ds_pids: dict[int, int] = {}  # pid -> local rank
        # pids of each node's teardown under way, in its order, by pdsh's "host: " prefix, and
        # their facts, held until the exit line says how many processes were spawned
        self._ds_killing: dict[str, list[int]] = {}
        self._ds_pending: dict[str, list[tuple[int, ExitFact]]] = {}
        self._ds_read = 0
        self._ray_errors = False
        self._mpi_rank: int | None = None
        self._mpi_block = False
        self._slurm_cancelled = False
        self._lightning_killing = False
        self._terminate: ExitFact | None = None

    # -- public -------------------------------------------------------------------------------

    def feed(self, line: str, rank: int | None = None, local: int | None = None) -> bool:
        """Read one line; True when it was a launcher or fatal-error line."""
        if self._section is not None and self._summary_line(line):
            return True
        if self._rdzv is not None and self._rendezvous_line(line):
            return True
        idle = not self._ray_errors and not self._mpi_block and self._terminate is None
        if idle and not _may_report(line):
            return False  # no handler's guard in it, and none waits for a next line
        for handler in self._HANDLERS:  # noqa: SIM110 (a plain loop: any() of a generator costs more)
            if handler(self, line, rank, local):
                return True
        return False

    def finish(self) -> None:
        open_ = self._section is not None or self._entry is not None or self._rdzv is not None
        if not (open_ or self._block or self._ds_pending or self._ds_pids):
            return  # nothing open or held: most logs, whose lines no launcher wrote
        self._close_summary()
        self._close_rendezvous()
        # What no exit line closed, in the order it was read, each node's list its own order.
        held = sorted(
            (order, local, fact)
            for facts in self._ds_pending.values()
            for local, (order, fact) in enumerate(facts)
        )
        self._ds_pending.clear()
        for _, local, fact in held:
            self._add(replace(fact, local_rank=local))
        for pid, local in self._ds_pids.items():
            rank = self.map.local_to_global.get(local)
            if rank is not None:
                self.map.pid(pid, rank)

    @property
    def exits(self) -> list[ExitFact]:
        facts = self._exits.items()
        pid_ranks = self.map.pid_ranks
        if not pid_ranks:
            return facts
        return [
            replace(f, rank=pid_ranks[f.pid])
            if f.rank is None and f.pid is not None and f.pid in pid_ranks
            else f
            for f in facts
        ]

    # -- handlers, tried in order --------------------------------------------------------------

    def _add(self, fact: ExitFact | None) -> bool:
        if fact is None:
            return False
        self._exits.add(fact)
        return True

    def _torchrun(self, line: str, rank: int | None, local: int | None) -> bool:
        if "Root Cause (first observed failure)" in line or line.strip() == "Failures:":
            self._open_summary("root" if "Root Cause" in line else "failures")
            return True
        if "death signal" in line and _TR_DEATH.search(line):
            self._death_signal = True
            return True
        if line.lstrip().startswith("[") and _SUMMARY_ENTRY.match(line):
            # A summary quoted from its middle: the entries are still torchrun's.
            self._open_summary("cut")
            self._entry = _SummaryEntry(first_observed=False)
            return True
        if "(local_rank: " in line and "rank" in line:
            field = _SUMMARY_FIELD.match(line)
            if field and field.group(1) == "rank":
                self._open_summary("cut")
                self._entry = _SummaryEntry(first_observed=False)
                self._summary_field("rank", field.group(2), line)
                return True
        if "Rendezvous complete for workers" in line:
            self._close_rendezvous()
            self._rdzv = {}
            return True
        return self._add(torchrun_exit(line))

    def _deepspeed(self, line: str, rank: int | None, local: int | None) -> bool:
        if "num_local_procs=" in line:
            match = _DS_NODE.search(line)
            if match:
                self._ds_local_procs = int(match.group(2))
                self._ds_node_rank = int(match.group(3))
                return True
        if "global_rank_mapping=" in line:
            self._deepspeed_mapping(line)
            return True
        if "spawned with command" in line:
            match = _DS_SPAWNED.search(line)
            local_arg = _DS_LOCAL_ARG.search(line, match.end()) if match else None
            if match and local_arg and len(self._ds_pids) < MAX_MAP:
                self._ds_pids[int(match.group(1))] = int(local_arg.group(1))
            return match is not None
        if "Killing subprocess" not in line and "exits with return code" not in line:
            return False
        node = _PDSH_PREFIX.match(line)
        key = node.group(1) if node else ""
        if key not in self._ds_killing and len(self._ds_killing) >= MAX_MAP:
            key = ""
        killing = self._ds_killing.setdefault(key, [])
        fact = deepspeed_exit(line, self._ds_local_procs or len(killing) or None)
        if fact is None:
            return False
        if fact.pid is not None:
            if len(killing) < MAX_MAP:
                killing.append(fact.pid)
                self._ds_read += 1
                self._ds_pending.setdefault(key, []).append((self._ds_read, fact))
            return True
        last = _DS_LOCAL_ARG.search(line)
        self._flush_killing(key, int(last.group(1)) + 1 if last else None)
        killing.clear()
        return self._add(fact)

    def _flush_killing(self, key: str, spawned: int | None) -> None:
        """sigkill_handler walks its process list in spawn order, which is local rank order
        when every node runs the same number of processes; but only a whole list is that
        order: when the exit line's last spawned --local_rank says more processes ran than
        the lines name (a paste that kept some), a pid's place says nothing of its rank."""
        pending = [fact for _, fact in self._ds_pending.pop(key, [])]
        whole = spawned is None or spawned == len(pending)
        for local, fact in enumerate(pending):
            self._add(replace(fact, local_rank=local) if whole else fact)

    def _deepspeed_mapping(self, line: str) -> None:
        start = line.find("{", line.find("global_rank_mapping="))
        hosts = []
        for match in _DS_MAPPING_ENTRY.finditer(line, start if start >= 0 else 0):
            ranks = int_list(match.group(2))
            self.map.host(match.group(1), ranks)
            hosts.append(ranks)
            if len(hosts) >= MAX_MAP:
                break
        node = self._ds_node_rank
        if node is not None and node < len(hosts):
            for local_rank, global_rank in enumerate(hosts[node]):
                self.map.pair(local_rank, global_rank)

    def _ray(self, line: str, rank: int | None, local: int | None) -> bool:
        if "local_rank=" in line and "node_rank=" in line:
            match = _RAY_WORKER.search(line)
            if match:
                host, pid, world, local_rank = (
                    match.group(1),
                    int(match.group(2)),
                    int(match.group(3)),
                    int(match.group(4)),
                )
                self.map.host_add(host, world)
                self.map.pid(pid, world)
                self.map.pair(local_rank, world)
                return True
        if "Training failed due to worker errors" in line:
            self._ray_errors = True
            return True
        if self._ray_errors and line.startswith("[Rank "):
            match = _RAY_RANKS.match(line.strip())
            if match:
                for world in int_list(match.group(1)):
                    self._add(ExitFact(world, None, None, None, line, launcher="ray"))
                return True
        return False

    def _slurm(self, line: str, rank: int | None, local: int | None) -> bool:
        if line.startswith("srun: ") and ("Terminating" in line or "Force Terminated" in line):
            self._slurm_cancelled = True
            return True
        facts = slurm_exits(line)
        for fact in facts:
            if self._slurm_cancelled and fact.exit_code == -15:
                fact = replace(fact, stopped_by_launcher=True)
            self._exits.add(fact)
        return bool(facts)

    def _mpi(self, line: str, rank: int | None, local: int | None) -> bool:
        if "exited with non-zero status" in line and "detected that" in line:
            self._mpi_block = True
            self._mpi_rank = None
            return True
        if not self._mpi_block:
            return False
        if "Process name:" in line:
            match = _MPI_PROCESS.search(line)
            self._mpi_rank = int(match.group(1)) if match else None
            return match is not None
        if "Exit code:" in line and self._mpi_rank is not None:
            match = _MPI_EXIT.search(line)
            if match:
                self._add(
                    ExitFact(
                        self._mpi_rank, None, None, int(match.group(1)), line, launcher="mpirun"
                    )
                )
                self._mpi_block = False
                self._mpi_rank = None
                return True
        return False

    def _single(self, line: str, rank: int | None, local: int | None) -> bool:
        for reader in _SINGLE_LINE:
            fact = reader(line)
            if fact is None:
                continue
            if fact.launcher == "slurm" and fact.stopped_by_launcher:
                self._slurm_cancelled = True
            if fact.launcher == "lightning":
                self._lightning_killing = True
            elif fact.launcher == "shell" and self._lightning_killing and fact.exit_code == 137:
                # Lightning SIGKILLs the main process right after its "Forcefully terminating".
                fact = replace(fact, stopped_by_launcher=True)
                self._lightning_killing = False
            return self._add(fact)
        return False

    def _python(self, line: str, rank: int | None, local: int | None) -> bool:
        if self._terminate is not None and "what():" in line:
            pending, self._terminate = self._terminate, None
            what = _RANK_IN_WHAT.search(line)
            if pending.rank is None and what:
                self._fix_last(pending, replace(pending, rank=int(what.group(1))))
            return False  # still an error line for the log reader
        fact = python_exit(line, rank, local)
        if fact is None:
            return False
        self._terminate = fact if "terminate called" in line else None
        return self._add(fact)

    def _fix_last(self, old: ExitFact, new: ExitFact) -> None:
        for bucket in (self._exits.tail, self._exits.head):
            if bucket and bucket[-1] is old:
                bucket[-1] = new
                return

    _HANDLERS = (_torchrun, _deepspeed, _ray, _slurm, _mpi, _single, _python)

    # -- torchrun's failure summary ------------------------------------------------------------

    def _open_summary(self, section: str) -> None:
        self._flush_entry()
        self._section = section

    def _summary_line(self, line: str) -> bool:
        stripped = line.strip()
        if stripped.startswith(("---", "===")) or "<NO_OTHER_FAILURES>" in stripped:
            self._flush_entry()
            if stripped.startswith("===") and self._section == "root":
                self._close_summary()
            return True
        if "Root Cause (first observed failure)" in line or stripped == "Failures:":
            self._open_summary("root" if "Root Cause" in line else "failures")
            return True
        if stripped.startswith("[") and _SUMMARY_ENTRY.match(line):
            self._flush_entry()
            self._entry = _SummaryEntry(first_observed=self._section == "root")
            return True
        match = _SUMMARY_FIELD.match(line) if self._entry is not None else None
        if match is None:
            self._close_summary()
            return False
        self._summary_field(match.group(1), match.group(2), line)
        return True

    def _summary_field(self, name: str, value: str, line: str) -> None:
        entry = self._entry
        assert entry is not None
        if len(entry.lines) < 8:
            entry.lines.append(line)
        if name == "time":
            entry.at = _summary_time(value)
        elif name == "host":
            entry.host = value.strip() or None
        elif name == "rank":
            match = _SUMMARY_RANK.match(value.strip())
            if match:
                entry.rank, entry.local = int(match.group(1)), int(match.group(2))
                self.map.pair(entry.local, entry.rank)
        elif name == "exitcode":
            match = _SUMMARY_EXIT.match(value.strip())
            if match:
                entry.code, entry.pid = int(match.group(1)), int(match.group(2))
                if entry.rank is not None:
                    self.map.pid(entry.pid, entry.rank)

    def _flush_entry(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None and (entry.rank is not None or entry.code is not None):
            self._block.append(entry)
            if len(self._block) >= MAX_EXITS:
                self._emit_block()

    def _close_summary(self) -> None:
        self._flush_entry()
        self._section = None
        self._emit_block()

    def _emit_block(self) -> None:
        block, self._block = self._block, []
        if not block:
            return
        # torchrun SIGTERMs the workers still running once one failed (or once it was told to
        # stop): those entries are victims, whatever the summary's order says.
        other_cause = any(e.code not in (None, -15) for e in block)
        for entry in block:
            stopped = entry.code == -15 and (other_cause or self._death_signal)
            line = next((x for x in entry.lines if "exitcode" in x), entry.lines[-1])
            self._exits.add(
                ExitFact(
                    entry.rank,
                    entry.local,
                    entry.pid,
                    entry.code,
                    line,
                    launcher="torchrun",
                    host=entry.host,
                    first_observed=entry.first_observed,
                    stopped_by_launcher=stopped,
                    at=entry.at,
                )
            )

    # -- torchrun's rendezvous result ----------------------------------------------------------

    def _rendezvous_line(self, line: str) -> bool:
        block = self._rdzv
        assert block is not None
        if "=" not in line:
            self._close_rendezvous()
            return False
        if "group_rank=" in line:
            match = _GROUP_RANK.search(line)
            if match:
                block["group_rank"] = int(match.group(1))
        for key in ("local_ranks=", "global_ranks="):
            at = line.find(key)
            if at >= 0:
                match = _INT_LIST.match(line, at + len(key))
                if match:
                    block[key] = int_list(match.group(1))
        if "global_world_sizes=" in line:
            self._close_rendezvous()
        return True

    def _close_rendezvous(self) -> None:
        block, self._rdzv = self._rdzv, None
        if not block:
            return
        local_ranks = block.get("local_ranks=")
        global_ranks = block.get("global_ranks=")
        if isinstance(local_ranks, list) and isinstance(global_ranks, list):
            for local_rank, global_rank in zip(local_ranks, global_ranks, strict=False):
                self.map.pair(local_rank, global_rank)
