"""Training, launcher and NCCL log tails.

Understands: the lab step line (`... [rank3] host=h step=42 loss=.. step_time=0.5s`), Megatron
`iteration N/ M` lines, torchrun `[defaultN]:` / `[rankN]:` prefixes and failure summaries, the
PyTorch NCCL watchdog in its several versions, the desync report, DETAIL mismatch errors, and
`NCCL INFO` / `NCCL WARN` lines. Anything else is ignored (logs are mostly noise), but a file
in which nothing at all was recognised is reported as a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

_RANK_TAG = re.compile(r"\[rank(\d+)\]", re.IGNORECASE)
_LOCAL_PREFIX = re.compile(r"^\[(?:[A-Za-z_][\w-]*?)(\d+)\]:")
_RANK_WORD = re.compile(r"(?:\bRank (\d+)\]|\brank=(\d+)\b)")
_FILE_RANK = re.compile(r"rank[_-]?(\d+)(?:\D*)$", re.IGNORECASE)
_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_STEP = re.compile(r"\bstep[= ](\d+)\b")
_STEP_TIME = re.compile(r"\bstep_time=([\d.]+)s?")
_HOST = re.compile(r"\bhost=(\S+)")
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)")
_ITER_MS = re.compile(r"elapsed time per iteration \(ms\):\s*([\d.]+)")
_WORLD = re.compile(r"\bworld_size[=: ]\s*(\d+)")
_WD_OLD = re.compile(
    r"Watchdog caught collective operation timeout: Work\w*\(SeqNum=(\d+), OpType=(\w+)"
)
_WD_RAN = re.compile(r"ran for (\d+) milliseconds")
_WD_WORK = re.compile(
    r"detected by watchdog at work: (\d+), last enqueued \w* ?work: (\d+), "
    r"last completed \w* ?work: (\d+)"
)
_WD_SEQ = re.compile(
    r"failure detected by watchdog at work sequence id: (\d+) PG status: "
    r"last enqueued work: (\d+), last completed work: (\d+)"
)
_LAST_COMPLETED = re.compile(r"last enqueued NCCL work: (\d+), last completed NCCL work: (\d+)")
_DESYNC_TIMEOUT = re.compile(r"Timeout at collective: (\w+), #(\d+)")
_DESYNC_LAG = re.compile(r"\[(\d+)\] finished collective #(\d+), but didn't join collective #(\d+)")
_DETAIL = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=(\d+)\s*,?\s*"
    r"OpType=(\w+).*?but Rank (\d+) is running collective: "
    r"CollectiveFingerPrint\(SequenceNumber=(\d+)\s*,?\s*OpType=(\w+)"
)
_NCCL = re.compile(
    r"^(?:\[\d+\] )?(?P<host>[\w.-]+):(?P<pid>\d+):\d+ \[(?P<dev>\d+)\] "
    r"NCCL (?P<lvl>INFO|WARN) (?P<msg>.*)"
)
_NCCL_ENV = re.compile(r"\b(NCCL_\w+) set by environment to (\S+)")
_TORCHRUN_FAIL = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(\d+) \(local_rank: (\d+)\)")
_SUMMARY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+) \(pid: (\d+)\)")
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
class ExitFact:
    rank: int | None
    local_rank: int | None
    pid: int | None
    exit_code: int
    line: str


@dataclass
class LineFact:
    rank: int | None
    local_rank: int | None
    line: str


@dataclass
class LogFacts:
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
    world_size: int | None = None
    fr_disabled: bool = False
    problems: list[str] = field(default_factory=list)


def rank_from_filename(path: str) -> int | None:
    name = path.rsplit("/", 1)[-1]
    name = re.sub(r"\.(log|txt|out|err|json)$", "", name)
    match = _FILE_RANK.search(name)
    return int(match.group(1)) if match else None


def parse_timestamp(text: str) -> datetime | None:
    match = _TIMESTAMP.search(text, 0, 40)
    if not match:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    micro = int((fraction or "0").ljust(6, "0")[:6])
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=UTC
        )
    except ValueError:
        return None


_LAB_STEP = re.compile(
    r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3}) \w+ \[rank(\d+)\] host=(\S+) "
    r"step=(\d+)\b(?:.*\bstep_time=([\d.]+)s?)?"
)


def _lab_step(match: re.Match, line: str) -> StepRecord:
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups()[:7])
    try:
        at = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=UTC)
    except ValueError:
        at = None
    step_time = match.group(11)
    return StepRecord(
        int(match.group(8)),
        None,
        int(match.group(10)),
        at,
        float(step_time) if step_time else None,
        match.group(9),
        line,
    )


_MAX_KEPT = 20  # error / warn lines kept per file: enough to quote, bounded for 4,096 ranks


def parse_log(path: str, text: str | None) -> LogFacts:
    facts = LogFacts(path=path, file_rank=rank_from_filename(path))
    if not text:
        return facts
    recognised = 0
    summary_rank: tuple[int, int] | None = None
    previous_rank: int | None = None
    for raw_line in text.splitlines():
        line = raw_line.rstrip()
        if not line:
            continue
        if line[0].isdigit():
            # Fast path for the lab step line, which makes up most of a healthy log.
            lab = _LAB_STEP.match(line)
            if lab:
                recognised += 1
                previous_rank = int(lab.group(8))
                facts.steps.append(_lab_step(lab, line))
                continue
        continuation = line[0] in " \t"
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
            rank = previous_rank if continuation and previous_rank is not None else facts.file_rank
        previous_rank = rank
        if "step" in line:
            step = _STEP.search(line)
            if step and "NCCL" not in line:
                recognised += 1
                if rank is None and local is None:
                    word = _RANK_WORD.search(line)
                    if word:
                        rank = int(word.group(1) or word.group(2))
                step_time = _STEP_TIME.search(line)
                host = _HOST.search(line)
                facts.steps.append(
                    StepRecord(
                        rank,
                        local,
                        int(step.group(1)),
                        parse_timestamp(line),
                        float(step_time.group(1)) if step_time else None,
                        host.group(1) if host else None,
                        line,
                    )
                )
                continue
        if "iteration" in line:
            iteration = _ITERATION.search(line)
            if iteration:
                recognised += 1
                ms = _ITER_MS.search(line)
                facts.steps.append(
                    StepRecord(
                        rank,
                        local,
                        int(iteration.group(1)),
                        parse_timestamp(line),
                        float(ms.group(1)) / 1000 if ms else None,
                        None,
                        line,
                    )
                )
                continue
        if "world_size" in line and facts.world_size is None:
            world = _WORLD.search(line)
            if world:
                facts.world_size = int(world.group(1))
        if "atchdog" in line or "last completed" in line:
            fact = _watchdog(line, rank, local)
            if fact:
                recognised += 1
                facts.watchdog.append(fact)
                continue
        if "collective" in line and _parse_collective_reports(line, rank, local, facts):
            recognised += 1
            continue
        if "NCCL" in line:
            if "FlightRecorder is disabled" in line:
                facts.fr_disabled = True
                recognised += 1
                continue
            nccl = _NCCL.match(line)
            if nccl:
                recognised += 1
                msg = nccl.group("msg")
                if nccl.group("lvl") == "WARN":
                    _keep(facts.nccl_warn, LineFact(rank, local, line))
                env = _NCCL_ENV.search(msg)
                if env:
                    facts.nccl_env[env.group(1)] = env.group(2)
                if msg.startswith("NET/") and "Using" in msg:
                    _keep(facts.nccl_net, LineFact(rank, local, line))
                continue
        if "exitcode" in line or "local_rank:" in line:
            fail = _TORCHRUN_FAIL.search(line)
            if fail:
                recognised += 1
                facts.exits.append(
                    ExitFact(None, int(fail.group(2)), int(fail.group(3)), int(fail.group(1)), line)
                )
                continue
            summary = _SUMMARY_RANK.match(line)
            if summary:
                summary_rank = (int(summary.group(1)), int(summary.group(2)))
                recognised += 1
                continue
            exit_match = _SUMMARY_EXIT.match(line)
            if exit_match and summary_rank:
                recognised += 1
                facts.exits.append(
                    ExitFact(
                        summary_rank[0],
                        summary_rank[1],
                        int(exit_match.group(2)),
                        int(exit_match.group(1)),
                        line,
                    )
                )
                summary_rank = None
                continue
        if any(hint in line for hint in _ERROR_HINTS) and "UserWarning" not in line:
            recognised += 1
            _keep(facts.errors, LineFact(rank, local, line))
    if recognised == 0 and text.count("\n") >= 3:
        facts.problems.append(f"{path}: no step, watchdog, NCCL or error line recognised")
    return facts


def _keep(bucket: list[LineFact], fact: LineFact) -> None:
    # Keep the first lines (the cause usually comes first) and a rolling window of the latest
    # (where a hang shows), bounded so 4,096 logs stay cheap.
    if len(bucket) >= _MAX_KEPT:
        del bucket[_MAX_KEPT // 2]
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
        facts.lagging[int(lag.group(1))] = int(lag.group(3))
        facts.desync.append(LineFact(int(lag.group(1)), None, line.strip()))
        return True
    timeout = _DESYNC_TIMEOUT.search(line)
    if timeout:
        facts.desync.append(LineFact(rank, local, line.strip()))
        facts.watchdog.append(
            WatchdogFact(
                rank, local, int(timeout.group(2)), timeout.group(1), None, None, None, line.strip()
            )
        )
        return True
    detail = _DETAIL.search(line)
    if detail:
        facts.mismatches.append(LineFact(rank, local, line.strip()))
        return True
    return False
