"""Training, launcher and NCCL log tails.

Understands: the lab step line (`... [rank3] host=h step=42 loss=.. step_time=0.5s`), Megatron
`iteration N/ M` lines, torchrun `[defaultN]:` / `[rankN]:` prefixes and failure summaries, the
PyTorch NCCL watchdog in its several versions, the desync report, DETAIL mismatch errors, and
`NCCL INFO` / `NCCL WARN` lines, and the launchers' own failure and rank-numbering lines
(`analysis.parsers.launchers`). What NCCL says about collectives, peers, its own configuration
and slow ranks comes from `analysis.parsers.nccl`. Anything else is ignored (logs are mostly
noise), but a file in which nothing at all was recognised is reported as a problem.

Each line goes through a table of (substring guard, handler) pairs, after a fast path for the
lab step line that makes up most of a healthy log; every list kept is bounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import ClassVar

from analysis.parsers import nccl
from analysis.parsers.launchers import ExitFact, LauncherReader
from analysis.parsers.log_signals import apply_signals, apply_started, signal_reader
from analysis.parsers.nccl import (
    CollectiveFact,
    CommInitFact,
    NcclConfigFact,
    PeerFact,
    SlowFact,
)
from analysis.signals import LineSource, Signal
from analysis.signals.times import utc_stamp

__all__ = [
    "ExitFact",
    "LineFact",
    "LogFacts",
    "StepRecord",
    "WatchdogFact",
    "parse_log",
    "parse_timestamp",
    "rank_from_filename",
]

_RANK_TAG = re.compile(r"\[rank(\d{1,18})\]", re.IGNORECASE)
_LOCAL_PREFIX = re.compile(r"^\[(?:[A-Za-z_][\w-]*?)(\d{1,18})\]:")
_RANK_WORD = re.compile(r"(?:R(?<!\wR)ank (\d{1,18})\]|r(?<!\wr)ank=(\d{1,18})\b)")
_FILE_RANK = re.compile(r"rank[_-]?(\d{1,18})(?:\D*)$", re.IGNORECASE)
_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_STEP = re.compile(r"s(?<!\ws)tep[= ](\d{1,18})\b")
_STEP_TIME = re.compile(r"s(?<!\ws)tep_time=([\d.]+)s?")
_HOST = re.compile(r"h(?<!\wh)ost=(\S+)")
_ITERATION = re.compile(r"i(?<!\wi)teration\s+(\d{1,18})\s*/\s*(\d{1,18})")
_ITER_MS = re.compile(r"elapsed time per iteration \(ms\):\s*([\d.]+)")
_WORLD = re.compile(r"w(?<!\ww)orld_size[=: ]\s*(\d{1,18})")
_WD_OLD = re.compile(
    r"Watchdog caught collective operation timeout: Work\w*\(SeqNum=(\d{1,18}), OpType=(\w+)"
)
_WD_RAN = re.compile(r"ran for (\d{1,18}) milliseconds")
_WD_WORK = re.compile(
    r"detected by watchdog at work: (\d{1,18}), last enqueued \w* ?work: (\d{1,18}), "
    r"last completed \w* ?work: (\d{1,18})"
)
_WD_SEQ = re.compile(
    r"failure detected by watchdog at work sequence id: (\d{1,18}) PG status: "
    r"last enqueued work: (\d{1,18}), last completed work: (\d{1,18})"
)
_LAST_COMPLETED = re.compile(
    r"last enqueued NCCL work: (\d{1,18}), last completed NCCL work: (\d{1,18})"
)
_DESYNC_TIMEOUT = re.compile(r"Timeout at collective: (\w+), #(\d{1,18})")
_DESYNC_LAG = re.compile(
    r"\[(\d{1,18})\] finished collective #(\d{1,18}), but didn't join collective #(\d{1,18})"
)
# One side of a DETAIL mismatch; a line naming two of them is a mismatch. Read with finditer
# rather than one pattern spanning both sides, which would rescan the line from every start.
_FINGERPRINT = re.compile(
    r"Rank (\d{1,18}) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d{1,18})"
    r"\s*(?:,\s*)?OpType=(\w+)"
)
_NCCL = re.compile(
    r"^(?:\[\d+\] )?(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] "
    r"NCCL (?P<lvl>INFO|WARN) (?P<msg>.*)"
)
_NCCL_ENV = re.compile(r"(N(?<!\wN)CCL_\w+) set by environment to (\S+)")
_ERROR_HINTS = (
    "Traceback",
    "Error",
    "error:",
    "terminate called",
    "Killed",
    "Segmentation fault",
    "SIGKILL",
    "SIGABRT",
    "SIGSEGV",
    "out of memory",
    "what():",
    "enforce fail",
)


@dataclass
class StepRecord:
    rank: int | None
    local_rank: int | None
    step: int
    at: datetime | None
    step_time: float | None
    host: str | None
    line: str


@dataclass
class WatchdogFact:
    rank: int | None
    local_rank: int | None
    seq: int | None
    op: str | None
    last_enqueued: int | None
    last_completed: int | None
    ran_ms: int | None
    line: str


@dataclass
class LineFact:
    rank: int | None
    local_rank: int | None
    line: str


@dataclass
class LogFacts:
    """What one log file says. `parse_log` builds and fills it; once stored and read back
    (analysis/nodemap.py) it is read, never changed: its empty lists and sets are then one
    shared empty tuple and frozenset (`CODEC_SHARED_EMPTIES`), which fail loudly if written."""

    CODEC_SHARED_EMPTIES: ClassVar[bool] = True

    path: str
    file_rank: int | None
    steps: list[StepRecord] = field(default_factory=list)
    watchdog: list[WatchdogFact] = field(default_factory=list)
    desync: list[LineFact] = field(default_factory=list)
    lagging: dict[int, int] = field(default_factory=dict)  # rank -> first collective not joined
    mismatches: list[LineFact] = field(default_factory=list)
    exits: list[ExitFact] = field(default_factory=list)
    errors: list[LineFact] = field(default_factory=list)
    nccl_warn: list[LineFact] = field(default_factory=list)
    nccl_env: dict[str, str] = field(default_factory=dict)
    nccl_net: list[LineFact] = field(default_factory=list)
    # From the launchers (torchrun's rendezvous result and failure summary, DeepSpeed's world
    # info, Ray Train's worker list): bounded to launchers.MAX_MAP entries each. A local rank
    # that two reports in this file map to different global ranks is left out.
    local_to_global: dict[int, int] = field(default_factory=dict)
    host_ranks: dict[str, list[int]] = field(default_factory=dict)  # host -> ranks, local order
    pid_ranks: dict[int, int] = field(default_factory=dict)
    # From analysis.parsers.nccl, each list keeping its first and latest entries.
    collectives: list[CollectiveFact] = field(default_factory=list)
    peer_errors: list[tuple[int | None, int | None, PeerFact]] = field(default_factory=list)
    nccl_config: list[tuple[int | None, int | None, NcclConfigFact]] = field(default_factory=list)
    slow_reports: list[SlowFact] = field(default_factory=list)
    # NCCL's communicator set-up lines (rank, pid, size) and the ranks a desync report's
    # snapshot names: who wrote or was seen, even without a step line.
    comm_inits: list[CommInitFact] = field(default_factory=list)
    named_ranks: set[int] = field(default_factory=set)
    # The launcher's agents could not reach the rendezvous: the job never started.
    rendezvous_errors: list[LineFact] = field(default_factory=list)
    world_size: int | None = None
    fr_disabled: bool = False
    problems: list[str] = field(default_factory=list)
    # What the line reader (analysis.signals) found in the lines above, bounded per kind.
    signals: tuple[Signal, ...] = ()


_LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".json")


def rank_from_filename(path: str) -> int | None:
    name = path.rsplit("/", 1)[-1]
    if "ank" not in name and "ANK" not in name:
        return None  # no rank[_-]N in it (case-insensitive): most files, at no regex's cost
    for suffix in _LOG_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    match = _FILE_RANK.search(name)
    return int(match.group(1)) if match else None


def parse_timestamp(text: str) -> datetime | None:
    match = _TIMESTAMP.search(text, 0, 40)
    if not match:
        return None
    return utc_stamp(*match.groups())


# The step time is the last `step_time=` on the line (a greedy `.*`); its word boundary is
# checked behind the literal, so the `.*` backs off by the literal's fast test, not a try of
# `\b` at every character.
_LAB_STEP = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \w+ \[rank(\d{1,18})\] host=(\S+) "
    r"step=(\d{1,18})\b(?:.*step_time=(?<!\wstep_time=)([\d.]+))?"
)


def _lab_step(match: re.Match, line: str) -> StepRecord:
    # The hot path of a healthy log: datetime's C parser, not seven int() calls.
    stamp, millis, rank, host, step, step_time = match.groups()
    try:
        at = datetime.fromisoformat(f"{stamp}.{millis}+00:00")
    except ValueError:
        at = None
    return StepRecord(int(rank), None, int(step), at, seconds(step_time), host, line)


def seconds(text: str | None, scale: float = 1.0) -> float | None:
    """A duration printed by the job (`0.207`): None when it is not one number ("0.2.07"
    matches [\\d.]+) or not finite (a stored diagnosis is JSON, which has no inf)."""
    if not text or len(text) > 40:
        return None
    try:
        value = float(text) * scale
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_MAX_KEPT = 20  # error / warn lines kept per file: enough to quote, bounded for 4,096 ranks
_MAX_COLLECTIVES = 512
_MAX_PEERS = 64
_MAX_CONFIG = 256
_MAX_SLOW = 512
_MAX_LAGGING = 65_536

# Substrings that must be present for analysis.parsers.nccl's readers to find anything.
_COLLECTIVE_HINTS = ("atchdog", "last completed", "ollective", "SeqNum", "lagging", "work: ")
_PEER_HINTS = ("NCCL", "gloo", "peer", "remote=[", "onnect", "monitoredBarrier")
_SLOW_HINTS = ("Rnk", "Ranks with lowest", "STRAGGLER")
_RENDEZVOUS_HINTS = (
    "RendezvousConnectionError",
    "RendezvousTimeoutError",
    "The client socket has timed out after",
)
# A desync report's snapshot line; the list is bounded, each item by its digits.
_DESYNC_STATE = re.compile(
    r"\s{0,40}\[(\d{1,7}(?:, \d{1,7}){0,8191})\] (?:started|finished|joined) "
)
_MAX_COMM_INITS = 256
_JOB_STEP_WORDS = ("srun", "slurmstepd", "StepId", "oom-kill", "oom_kill", "job step")


def parse_log(path: str, text: str | None, source: LineSource | None = None) -> LogFacts:
    """The log's facts; `source` says where it came from (its node, the node's pids) for the
    line reader's signals."""
    facts = LogFacts(path=path, file_rank=rank_from_filename(path))
    if not text:
        return facts
    reader = _LogReader(facts, source)
    reader.whole = reader.signals.prepare(text)
    steps, lab_step = facts.steps, _LAB_STEP.match
    for raw_line in text.splitlines():
        line = raw_line.rstrip()
        if not line:
            continue
        # Fast path for the lab step line, which makes up most of a healthy log: no call of
        # `read` for it.
        lab = lab_step(line) if line[0].isdigit() else None
        if lab:
            reader.recognised += 1
            step = _lab_step(lab, line)
            reader.previous_rank = step.rank
            steps.append(step)
        else:
            reader.read(line, raw_line)
    reader.finish()
    if reader.recognised == 0 and text.count("\n") >= 3:
        facts.problems.append(f"{path}: no step, watchdog, NCCL or error line recognised")
    return facts


class _LogReader:
    """One pass over one log. `read` resolves who wrote the line, then offers it to each
    handler whose guard substring it contains, until one consumes it."""

    def __init__(self, facts: LogFacts, source: LineSource | None = None) -> None:
        self.facts = facts
        self.recognised = 0
        self.previous_rank: int | None = None
        self.launchers = LauncherReader()
        self.signals = signal_reader(facts.path, source)
        self.whole = False  # the line reader took the text whole (ncclras JSON)

    def read(self, line: str, raw: str | None = None) -> None:
        """Any line but the lab step line (`parse_log` takes that one itself)."""
        if not self.whole:
            self.signals.read_line(raw or line)
        rank, local = self._who(line)
        self.previous_rank = rank
        for hint in _PEER_HINTS:
            if hint in line:
                self._peer_and_config(line, rank, local)
                break
        if self._dispatch(_BEFORE_LAUNCHERS, line, rank, local):
            return
        if self.launchers.feed(line, rank, local):
            self.recognised += 1
            # A process's last words can carry the watchdog's report on the same line.
            if any(hint in line for hint in _COLLECTIVE_HINTS):
                self._collective(line, rank, local)
            if _is_error(line):
                _keep(self.facts.errors, LineFact(rank, local, line))
            return
        if self._dispatch(_AFTER_LAUNCHERS, line, rank, local):
            return
        if _is_error(line):
            self.recognised += 1
            _keep(self.facts.errors, LineFact(rank, local, line))

    def _dispatch(self, table: _Table, line: str, rank: int | None, local: int | None) -> bool:
        for guards, handler in table:
            for guard in guards:  # a plain loop: any() with a generator costs more per line
                if guard in line:
                    if handler(self, line, rank, local):
                        self.recognised += 1
                        return True
                    break
        return False

    def finish(self) -> None:
        self.launchers.finish()
        self.facts.exits = self.launchers.exits
        rank_map = self.launchers.map
        self.facts.local_to_global = rank_map.local_to_global
        self.facts.host_ranks = rank_map.host_ranks
        self.facts.pid_ranks = rank_map.pid_ranks
        signals = self.signals.signals()
        if signals or apply_started(self.facts, self.signals):
            self.recognised += 1
        apply_signals(self.facts, signals, _keep, LineFact)

    def _who(self, line: str) -> tuple[int | None, int | None]:
        local = None
        prefix = _LOCAL_PREFIX.match(line)
        if prefix and not line.startswith("[rank"):
            local = int(prefix.group(1))
        tag = _RANK_TAG.search(line, 0, 80)
        rank: int | None = int(tag.group(1)) if tag else None
        if rank is None and "ank" in line:
            # A rank written in the line beats the one in the file name.
            word = _RANK_WORD.search(line)
            if word:
                rank = int(word.group(1) or word.group(2))
        if rank is None and local is None:
            # Indented lines continue a multi-line report (desync) from the line above.
            continuation = line[0] in " \t"
            previous = self.previous_rank
            rank = previous if continuation and previous is not None else self.facts.file_rank
        return rank, local

    # -- handlers: each returns True when it consumed the line ---------------------------------

    def _step(self, line: str, rank: int | None, local: int | None) -> bool:
        for word in _JOB_STEP_WORDS:
            if word in line:
                return False  # Slurm's job steps are not training steps
        step = _STEP.search(line)
        if not step or "NCCL" in line:
            return False
        step_time = _STEP_TIME.search(line)
        host = _HOST.search(line)
        self.facts.steps.append(
            StepRecord(
                rank,
                local,
                int(step.group(1)),
                parse_timestamp(line),
                seconds(step_time.group(1)) if step_time else None,
                host.group(1) if host else None,
                line,
            )
        )
        return True

    def _iteration(self, line: str, rank: int | None, local: int | None) -> bool:
        iteration = _ITERATION.search(line)
        if not iteration:
            return False
        ms = _ITER_MS.search(line)
        self.facts.steps.append(
            StepRecord(
                rank,
                local,
                int(iteration.group(1)),
                parse_timestamp(line),
                seconds(ms.group(1), 1 / 1000) if ms else None,
                None,
                line,
            )
        )
        return True

    def _world_size(self, line: str, rank: int | None, local: int | None) -> bool:
        if self.facts.world_size is None:
            world = _WORLD.search(line)
            if world:
                self.facts.world_size = int(world.group(1))
        return False  # the line may say more

    def _collective(self, line: str, rank: int | None, local: int | None) -> bool:
        self._collective_facts(line, rank)
        if "atchdog" in line or "last completed" in line:
            fact = _watchdog(line, rank, local)
            if fact:
                _keep(self.facts.watchdog, fact, _MAX_COLLECTIVES)
                return True
        return "collective" in line and _parse_collective_reports(line, rank, local, self.facts)

    def _collective_facts(self, line: str, rank: int | None) -> None:
        for fact in nccl.collective_facts(line):
            if fact.rank is None and rank is not None:
                fact = replace(fact, rank=rank)
            _keep(self.facts.collectives, fact, _MAX_COLLECTIVES)

    def _nccl(self, line: str, rank: int | None, local: int | None) -> bool:
        if "FlightRecorder is disabled" in line:
            self.facts.fr_disabled = True
            return True
        comm = nccl.comm_init_fact(line)
        if comm is not None:
            _keep(self.facts.comm_inits, comm, _MAX_COMM_INITS)
        match = _NCCL.match(line)
        if not match:
            return False
        msg = match.group("msg")
        if match.group("lvl") == "WARN":
            _keep(self.facts.nccl_warn, LineFact(rank, local, line))
        env = _NCCL_ENV.search(msg)
        if env and (env.group(1) in self.facts.nccl_env or len(self.facts.nccl_env) < 256):
            self.facts.nccl_env[env.group(1)] = env.group(2)
        if msg.startswith("NET/") and "Using" in msg:
            _keep(self.facts.nccl_net, LineFact(rank, local, line))
        return True

    def _peer_and_config(self, line: str, rank: int | None, local: int | None) -> None:
        peer = nccl.peer_fact(line)
        if peer is not None:
            _keep(self.facts.peer_errors, (rank, local, peer), _MAX_PEERS)
        config = nccl.nccl_config_fact(line)
        if config is not None:
            _keep(self.facts.nccl_config, (rank, local, config), _MAX_CONFIG)

    def _desync_snapshot(self, line: str, rank: int | None, local: int | None) -> bool:
        # "[0, 1, 2] started ALLREDUCE" under "#315 started ranks:": where each rank was.
        match = _DESYNC_STATE.match(line)
        if match and len(self.facts.named_ranks) < _MAX_LAGGING:
            self.facts.named_ranks.update(int(r) for r in match.group(1).split(", "))
        return False  # the desync reader may still want the line

    def _rendezvous(self, line: str, rank: int | None, local: int | None) -> bool:
        fact = LineFact(rank, local, line)
        _keep(self.facts.rendezvous_errors, fact)
        _keep(self.facts.errors, fact)
        return True

    def _slow_line(self, line: str, rank: int | None, local: int | None) -> bool:
        found = False
        for fact in nccl.slow_facts(line):
            _keep(self.facts.slow_reports, fact, _MAX_SLOW)
            found = True
        return found


_Handler = Callable[[_LogReader, str, "int | None", "int | None"], bool]
_Table = tuple[tuple[tuple[str, ...], _Handler], ...]
# The common line kinds, none of which a launcher prints, go first so that most lines never
# reach the launchers' readers; the rest after.
_BEFORE_LAUNCHERS: _Table = (
    (("NCCL",), _LogReader._nccl),
    (_SLOW_HINTS, _LogReader._slow_line),
    (("step",), _LogReader._step),
)
_AFTER_LAUNCHERS: _Table = (
    (("iteration",), _LogReader._iteration),
    (("world_size",), _LogReader._world_size),
    (("] started ", "] finished ", "] joined "), _LogReader._desync_snapshot),
    (_RENDEZVOUS_HINTS, _LogReader._rendezvous),
    (_COLLECTIVE_HINTS, _LogReader._collective),
)


def _is_error(line: str) -> bool:
    for hint in _ERROR_HINTS:
        if hint in line:
            return "UserWarning" not in line
    return False


def _keep(bucket: list, fact: object, limit: int = _MAX_KEPT) -> None:
    # Keep the first lines (the cause usually comes first) and a rolling window of the latest
    # (where a hang shows), bounded so 4,096 logs stay cheap.
    if len(bucket) >= limit:
        del bucket[limit // 2]
    bucket.append(fact)


def _watchdog(line: str, rank: int | None, local: int | None) -> WatchdogFact | None:
    if rank is None:
        word = _RANK_WORD.search(line)
        if word:
            rank = int(word.group(1) or word.group(2))
    match = _WD_OLD.search(line)
    if match:
        ran = _WD_RAN.search(line)
        return WatchdogFact(
            rank,
            local,
            int(match.group(1)),
            match.group(2),
            None,
            None,
            int(ran.group(1)) if ran else None,
            line,
        )
    for pattern in (_WD_WORK, _WD_SEQ):
        match = pattern.search(line)
        if match:
            return WatchdogFact(
                rank,
                local,
                int(match.group(1)),
                None,
                int(match.group(2)),
                int(match.group(3)),
                None,
                line,
            )
    match = _LAST_COMPLETED.search(line)
    if match:
        return WatchdogFact(
            rank, local, None, None, int(match.group(1)), int(match.group(2)), None, line
        )
    return None


def _parse_collective_reports(
    line: str, rank: int | None, local: int | None, facts: LogFacts
) -> bool:
    lag = _DESYNC_LAG.search(line)
    if lag:
        lagging = int(lag.group(1))
        if lagging in facts.lagging or len(facts.lagging) < _MAX_LAGGING:
            facts.lagging[lagging] = int(lag.group(3))
        _keep(facts.desync, LineFact(lagging, None, line.strip()), _MAX_COLLECTIVES)
        return True
    timeout = _DESYNC_TIMEOUT.search(line)
    if timeout:
        _keep(facts.desync, LineFact(rank, local, line.strip()), _MAX_COLLECTIVES)
        _keep(
            facts.watchdog,
            WatchdogFact(
                rank, local, int(timeout.group(2)), timeout.group(1), None, None, None, line.strip()
            ),
            _MAX_COLLECTIVES,
        )
        return True
    if "CollectiveFingerPrint" in line and _fingerprints(line) >= 2:
        _keep(facts.mismatches, LineFact(rank, local, line.strip()), _MAX_COLLECTIVES)
        return True
    return False


def _fingerprints(line: str) -> int:
    count = 0
    for _ in _FINGERPRINT.finditer(line):
        count += 1
        if count >= 2:
            break
    return count
