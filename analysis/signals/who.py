"""Who wrote a line, and whom it is about: the rank, local rank, host and pid a line is tied to.

Launchers put their own prefix in front of every line of a rank's output, and there are many:
PyTorch's `[rank3]:`, torchrun's `[default3]:` (role + local rank: `[trainer3]:` too), srun
`--label`'s `3: `, Open MPI's `[1,3]<stderr>:`, Lightning's `[rank: 3]`, Ray's
`(RayTrainWorker pid=2803, ip=10.0.0.3)`, pdsh / DeepSpeed's `worker-1: `, `kubectl logs
--prefix`'s `[pod/train-worker-3/pytorch]`, NCCL's own `host:pid:tid [dev]` and UCX's
`[host:pid:0:tid]`. `writer` peels them off the start of the line, several deep, and says where
the message itself begins. `subject` reads whom a message with no writer speaks of (`rank 3
(pid 6) exited ...`, `Worker 3 has failed`, `task 3: Killed`), `named_pid` the pid it names.

A file's name or its folder can tie it to a rank or a pod: `rank3.log`, `trace_rank_3`,
torchrun's `--log-dir` layout `attempt_0/3/stderr.log` (a local rank), a pod's
`...-worker-3` (a node: which rank a pod's index is depends on the job, Kubeflow numbering
its master 0 and worker i as i + 1).

Every expression is anchored or bounded and applied to the first `HEAD` characters of a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEAD = 400

_SRUN_LABEL = re.compile(r" {0,8}(\d{1,7}): ")
# A terminal colour code left in front of a line (Ray's output), with or without its ESC.
_COLOUR = re.compile(r"\x1b?\[[0-9;]{0,12}m ?")
# MPICH's `-prepend-rank` `[3] `, unless what follows is NCCL's device-only line `[0] x.cc:71`.
_MPICH_PREFIX = re.compile(r"\[(\d{1,7})\] (?![\w/.-]{1,80}\.cc:\d|NCCL )")
_RANK_PREFIX = re.compile(r"\[rank(\d{1,7})\]:?\s?", re.IGNORECASE)
_ROLE_PREFIX = re.compile(r"\[([A-Za-z_][A-Za-z_-]{0,40})(\d{1,7})\]:\s?")
_RANK_WORD_PREFIX = re.compile(r"[Rr]ank ?(\d{1,7}): ")
_LIGHTNING_PREFIX = re.compile(r"\[rank: (\d{1,7})\] ")
_MPI_TAG = re.compile(r"\[(?:\d{1,9},)?(\d{1,7})\]<(?:stdout|stderr)>:\s?")
# A time in front of everything: the terminal's or a wrapper's, before the launcher's prefix.
_STAMP_PREFIX = re.compile(
    r"(?:\[\d{4}-\d\d-\d\d[ T][\d:.,]{5,18}\]"
    r"|\d{4}-\d\d-\d\d[ T][\d:.,]{5,18}(?:Z|[+-]\d\d:?\d\d)?"
    r"|[A-Z][a-z]{2} [A-Z][a-z]{2} {1,2}\d{1,2} \d\d:\d\d:\d\d \d{4}"
    r"|\d\d:\d\d:\d\d(?:[.,]\d{1,9})?) ?"
)
_RAY_PREFIX = re.compile(
    r"\((?:([\w.:-]{1,80}) )?pid=(\d{1,9})(?:, ip=([\w.:-]{1,64}))?\) |"
    r"\(([\w.:-]{1,80}), ip=([\w.:-]{1,64})\) "
)
_POD_PREFIX = re.compile(r"\[pod/([\w.-]{1,253})/[\w.-]{1,63}\] ")
_NCCL_PREFIX = re.compile(r"(?:\[(\d{1,7})\] )?([\w.-]{1,253}):(\d{1,9}):\d{1,9} \[\d{1,4}\] ")
_UCX_PREFIX = re.compile(r"\[([\w.-]{1,253}):(\d{1,9}):\d{1,9}:\d{1,9}\] ")
_HOST_PREFIX = re.compile(r"([A-Za-z0-9][\w.-]{0,252}): ")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
# Inside the message, near its start: the rank of whoever printed it. Every alternative led by
# its letter (`\bRank` as `R(?<!\wR)ank`): the search skips to the next `[`, `R` or `r` at a
# glance instead of trying four alternatives at each character.
_RANK_TAG = re.compile(
    r"\[rank(\d{1,7})\]|\[Rank (\d{1,7})\]|R(?<!\wR)ank (\d{1,7})\]|r(?<!\wr)ank=(\d{1,7})\b"
)
_RANK_ENV = re.compile(
    r"(?:g(?<!\wg)lobal_rank|R(?<!\wR)ANK|w(?<!\ww)orld_rank)[=: ]{1,3}(\d{1,7})\b"
)
# Whom a message speaks of when nobody's prefix says who wrote it.
_SUBJECT = re.compile(
    r"\b(?:[Rr]ank|RANK|[Ww]orker|[Tt]asks?|process rank)[ =:#]{1,3}(\d{1,7})\b(?!\s?/)"
)
_SETTING_UP = re.compile(r"\[(\d{1,7})\] is setting up NCCL communicator")
# Not `--local_rank=0` of a command line (DeepSpeed logs the last command it spawned).
_LOCAL_SUBJECT = re.compile(r"(?:l(?<![-\w]l)ocal_rank|L(?<![-\w]L)OCAL_RANK)[=: ]{1,3}(\d{1,7})\b")
# torchrun's failure summary: `rank      : 3 (local_rank: 3)`.
_SUMMARY_RANK = re.compile(r"\s{0,12}rank\s{0,12}:\s{0,4}(\d{1,7}) ")
# The failure lines' own expressions led by a letter, not by `\b` (`\bon` as `o(?<!\wo)n`, the
# same boundary): the search skips every position whose character no alternative starts with.
_HOST_IN_MESSAGE = re.compile(
    r"o(?<!\wo)n node ([\w.:-]{1,255})|Worker IP address: ([\w.:-]{1,255})"
    r"|i(?<!\wi)p=([\w.:-]{1,64})|h(?<!\wh)ost=([\w.-]{1,255})|^srun: error: ([\w.-]{1,255}): "
    r"|O(?<!\wO)N ([\w.-]{1,255}) CANCELLED AT"
)
_PID = re.compile(
    r"(?:p(?<!\wp)id|P(?<!\wP)ID)[=: ]{1,3}(\d{1,9})\b|w(?<!\ww)ith pid (\d{1,9})\b"
    r"|Killed process (\d{1,9})|\[(\d{1,9})\]: segfault at"
    r"|p(?<!\wp)rocess (\d{1,9}) (?:on node|managing|exited|terminated)|: line \d{1,9}: +(\d{1,9}) "
)
_FILE_RANK = re.compile(r"rank[_-]?(\d{1,7})(?!\d)", re.IGNORECASE)
_ATTEMPT_DIR = re.compile(r"attempt_\d{1,6}/(\d{1,7})/(?:stdout|stderr|error)")
_POD_NAME = re.compile(r"([A-Za-z0-9][\w.-]{0,200}-(?:worker|master|launcher|head)-\d{1,7})")
_CONTINUED = re.compile(r"\s{1,16}(pid|ip): ?([\w.:-]{1,255})\s{0,8}$")
_LOG_SUFFIX = re.compile(r"\.(?:log|txt|out|err|json)$")


@dataclass
class Writer:
    rank: int | None = None
    local: int | None = None
    host: str | None = None
    pid: int | None = None
    start: int = 0  # where the message begins, after every prefix
    task: int | None = None  # srun's task id, when nothing more precise followed it


def _nccl(line: str, at: int, found: Writer) -> int | None:
    match = _NCCL_PREFIX.match(line, at, at + HEAD)
    if not match:
        if line[at : at + 1] != "[":
            return None
        match = _UCX_PREFIX.match(line, at, at + HEAD)
        if not match:
            return None
        found.host, found.pid = match.group(1), int(match.group(2))
        return match.end()
    if match.group(1) is not None and found.rank is None:
        found.rank = int(match.group(1))
    found.host, found.pid = match.group(2), int(match.group(3))
    return match.end()


def _ray(line: str, at: int, found: Writer) -> int | None:
    if line[at : at + 1] != "(":
        return None
    match = _RAY_PREFIX.match(line, at, at + HEAD)
    if not match:
        return None
    if match.group(2):
        found.pid = int(match.group(2))
        found.host = match.group(3) or found.host
    else:
        found.host = match.group(5)
    return match.end()


# The rank prefixes by the character each must start with: a line is tried only against the
# ones its first character allows (most lines start with a time or a host, not a bracket).
_RANK_PREFIXES = {
    "[": (
        (_RANK_PREFIX, False),
        (_LIGHTNING_PREFIX, False),
        (_MPI_TAG, False),
        (_ROLE_PREFIX, True),
        (_MPICH_PREFIX, False),
    ),
    "R": ((_RANK_WORD_PREFIX, False),),
    "r": ((_RANK_WORD_PREFIX, False),),
}


def _ranked(line: str, at: int, found: Writer) -> int | None:
    if found.rank is not None or found.local is not None:
        return None  # one rank prefix per line: a second one belongs to the message
    for pattern, local in _RANK_PREFIXES.get(line[at : at + 1], ()):
        match = pattern.match(line, at, at + HEAD)
        if match:
            number = int(match.group(match.lastindex or 1))
            if local:
                found.local = number
            else:
                found.rank = number
            return match.end()
    return None


def _host(line: str, at: int, found: Writer) -> int | None:
    """pdsh's `host: ` in front of a remote line: only a name that looks like a host (digits
    and a separator, or an address), never `ERROR: ` or `RuntimeError: `."""
    match = _HOST_PREFIX.match(line, at, at + 256)
    if not match:
        return None
    name = match.group(1)
    hostlike = _IPV4.fullmatch(name) or (
        any(c.isdigit() for c in name) and ("-" in name or "." in name)
    )
    if not hostlike or name.endswith(("Error", "Exception")) or name.lower().startswith("srun"):
        return None
    found.host = name
    return match.end()


def _pod(line: str, at: int, found: Writer) -> int | None:
    if line[at : at + 1] != "[":
        return None
    match = _POD_PREFIX.match(line, at, at + HEAD)
    if not match:
        return None
    found.host = match.group(1)
    return match.end()


_PEELERS = (_ranked, _nccl, _ray, _pod, _host)


def writer(line: str) -> Writer:
    """The prefixes at the start of the line, outermost first, and who they say wrote it."""
    found = Writer()
    at = 0
    colour = _COLOUR.match(line, 0, 16) if line[:1] in ("\x1b", "[") else None
    if colour:
        at = colour.end()
    first = line[at : at + 2]
    if first[:1].isdigit() or first[:1].isupper() or first in ("[1", "[2"):
        stamp = _STAMP_PREFIX.match(line, at, at + 64)
        if stamp and _prefix_follows(line, stamp.end()):
            at = stamp.end()
    label = _SRUN_LABEL.match(line, at, at + 16)
    if label:
        found.task, at = int(label.group(1)), label.end()
    for _ in range(4):
        for peel in _PEELERS:
            end = peel(line, at, found)
            if end is not None:
                at = end
                break
        else:
            break
    found.start = at
    if found.rank is None and found.local is None and found.task is not None:
        found.rank = found.task  # one srun task per rank: the task id is the rank
    if found.rank is None and found.local is None:
        _tag_in_message(line, at, found)
    return found


def _prefix_follows(line: str, at: int) -> bool:
    """After a leading time, a launcher's prefix: `[rank4]:`, `[1,0]<stdout>:`, `host:pid:tid`."""
    end = at + 300  # the expressions matched in place: neither looks behind its start
    return (
        line.startswith("[", at)
        or _NCCL_PREFIX.match(line, at, end) is not None
        or _SRUN_LABEL.match(line, at, end) is not None
    )


def _tag_in_message(line: str, at: int, found: Writer) -> None:
    """`[rank3]` / `[Rank 3]` / `rank=3` / `RANK=3` printed early in the message itself."""
    head = line[at : at + 160]
    if "ank" not in head and "RANK" not in head:
        return
    summary = _SUMMARY_RANK.match(head)
    if summary:
        found.rank = int(summary.group(1))
        return
    tag = _RANK_TAG.search(head)
    if tag:
        found.rank = int(tag.group(tag.lastindex))  # one group an alternative: the one matched
        return
    env = _RANK_ENV.search(head)
    if env:
        found.rank = int(env.group(1))
        return
    local = _LOCAL_SUBJECT.search(head)
    if local:
        found.local = int(local.group(1))


# What every match of _SUBJECT, _SETTING_UP and _LOCAL_SUBJECT contains, without their
# boundary checks: where it is absent from a line, no part of the line names a subject.
# `(?:[Rr]ank|RANK|[Ww]orker|[Tt]asks?)[ =:#]{1,3}\d|\] is setting up NCCL communicator`, led by
# the class of its first characters so the search skips every other position at a glance
# (the alternation first tried at each character cost more than the line's other tests).
_SUBJECT_WORDS = re.compile(
    r"[RrWwTt\]](?:(?:(?<=[Rr])ank|(?<=R)ANK|(?<=[Ww])orker|(?<=[Tt])asks?)[ =:#]{1,3}\d"
    r"|(?<=\]) is setting up NCCL communicator)"
)


# A substring each alternative of _SUBJECT_WORDS needs: most lines hold none (`[rank3]` has no
# separator after "rank"), and a few `in` tests cost less than the search's tries.
_SUBJECT_NEEDS = ("ank ", "ank=", "ank:", "ank#", "ANK", "orker", "ask", "] is setting up NCCL")


def may_name_subject(line: str) -> bool:
    """False when `subject` finds nothing in any part of the line (a cheap test first)."""
    for needed in _SUBJECT_NEEDS:  # a plain loop: any() of a generator costs more
        if needed in line:
            return _SUBJECT_WORDS.search(line) is not None
    return False


def subject(message: str) -> tuple[int | None, int | None]:
    """(rank, local rank) a message speaks of: `rank 3 (pid 6) exited`, `Worker 3 has failed.`,
    `task 3: Killed`, `local_rank: 3 (pid: 812917)`."""
    head = message[:HEAD]
    match = _SETTING_UP.search(head) or _SUBJECT.search(head)
    if match:
        return int(match.group(1)), None
    local = _LOCAL_SUBJECT.search(head)
    return (None, int(local.group(1))) if local else (None, None)


def named_host(message: str) -> str | None:
    """The host a failure line names: `on node X`, `Worker IP address: X`, `ip=X`, `host=X`."""
    match = _HOST_IN_MESSAGE.search(message[:4096])
    if not match:
        return None
    return match.group(match.lastindex).rstrip(".:")  # one group an alternative


def named_pid(message: str) -> int | None:
    match = _PID.search(message[:4096])
    if not match:
        return None
    return int(match.group(match.lastindex))  # one group an alternative


def file_rank(path: str) -> tuple[int | None, int | None]:
    """(rank, local rank) a file's path gives: `rank3.log`, `trace_rank_3`, torchrun's
    `attempt_0/3/stderr.log` (a local rank)."""
    name = _LOG_SUFFIX.sub("", path.rsplit("/", 1)[-1])[-200:]
    match = _FILE_RANK.search(name)
    if match:
        return int(match.group(1)), None
    attempt = _ATTEMPT_DIR.search(path[-300:])
    if attempt:
        return None, int(attempt.group(1))
    return None, None


_WORKER_POD = re.compile(r"([A-Za-z0-9][\w.-]{0,200})-worker-(\d{1,7})$")
_MASTER_POD = re.compile(r"([A-Za-z0-9][\w.-]{0,200})-master-0\b")


def pod_rank(message: str, masters: frozenset[str] = frozenset()) -> int | None:
    """Kubeflow's PyTorchJob numbers its master pod RANK 0 and, when the job has a master,
    `-worker-i` RANK i + 1 (the training operator's numbering); without a master in view a
    worker's number gives none."""
    first = message[:256].split(None, 1)
    if not first:
        return None
    if first[0].endswith("-master-0"):
        return 0
    worker = _WORKER_POD.match(first[0])
    if worker and worker.group(1) in masters:
        return int(worker.group(2)) + 1
    return None


def master_pods(text: str) -> frozenset[str]:
    """The jobs (pod name prefixes) whose master pod a text names."""
    if "-master-0" not in text:
        return frozenset()
    return frozenset(m.group(1) for m in _MASTER_POD.finditer(text[:1_000_000]))


def continued(line: str) -> tuple[str, str] | None:
    """An indented `pid: 694415` / `ip: 10.0.0.3` under an error (Ray's actor errors)."""
    match = _CONTINUED.match(line[:300])
    return (match.group(1), match.group(2)) if match else None


def pod_name(path: str) -> str | None:
    """The pod a file is named after (`train-worker-3.log`, `logs/job-master-0/...`)."""
    for part in reversed(path[-600:].split("/")):
        match = _POD_NAME.match(_LOG_SUFFIX.sub("", part))
        if match:
            return match.group(1)
    return None
