"""What kind of failure a line reports, by the kind of evidence, not by one tool's wording.

`classify(message)` returns every (kind, code, peer) the message states: an exit code or a
signal, a kill, an OOM, an Xid, a timeout, a lost connection, a rendezvous or communicator
set-up failure, a desync or mismatch report, a link error, a node's state, an eviction, a
checkpoint under way, NCCL's configuration. One line may state several (`DistStoreError: wait
timeout` is a rendezvous failure and a timeout); the engine weighs them.

Each reader first checks plain lower-case stems in the message (one `lower()` per line, no
expression at all for the lines that name none of them, which is most of a log), then reads
what it needs with anchored or bounded expressions. Launcher teardown lines (`closing signal`,
`Killing subprocess`) state nothing about the rank they stop: `launchers.py` reads them.
"""

from __future__ import annotations

import re

from analysis.signals import cluster, comms
from analysis.signals.triggers import TRIGGERS, holds_any, may_say_anything, trie_pattern

Found = tuple[str, int | None, int | None]  # (kind, code, peer)
__all__ = ["READERS", "TRIGGERS", "classify", "exit_status", "may_say_anything"]

# --- exit codes and signals ----------------------------------------------------------------

_EXIT_CODE = re.compile(
    r"(?:exit ?code|exit_code|exit status|return code|returncode|exited with code|"
    r"terminated with code|with exit code)[\s:=()]{0,12}(-?\d{1,4})\b"
)
_SIGNAL_NUMBER = re.compile(
    r"s(?<!\ws)ignal:? (\d{1,2})\b|s(?<!\ws)ignals\.sig[a-z]{2,6}: (\d{1,2})\b"
    r"|received (\d{1,2}) death signal"
)
_SIGNAL_NAME = re.compile(r"s(?<!\ws)ig(kill|segv|abrt|bus|fpe|ill|term|int|hup|quit|pipe)\b")
_SIGNAL_NUMBERS = {
    "kill": 9,
    "segv": 11,
    "abrt": 6,
    "bus": 7,
    "fpe": 8,
    "ill": 4,
    "term": 15,
    "int": 2,
    "hup": 1,
    "quit": 3,
    "pipe": 13,
}
# The launcher stopping the others once one failed: states nothing about the rank it stops.
_TEARDOWN = (
    "closing signal",
    "via signal",
    "killing subprocess",
    "terminating process",
    "sending signal",
)
# A process that went away without a code: Ray's "A worker died", "exited unexpectedly".
_DIED = (
    "worker died",
    "process died",
    "actor died",
    "died unexpectedly",
    "exited unexpectedly",
    "unexpectedly exits",
    "has failed.",
    "has died",
    "worker group failed",
    "crashloopbackoff",
)


def exit_status(message: str) -> int | None:
    """The exit status a departure line states, in the launchers' convention: the code as
    printed (`exitcode: -9`, `exit code 137`), else minus the signal (`signal 9` -> -9)."""
    low = message[:4096].lower()
    code = _EXIT_CODE.search(low)
    if code:
        return int(code.group(1))
    number = _SIGNAL_NUMBER.search(low)
    if number:
        return -int(next(g for g in number.groups() if g is not None))
    name = _SIGNAL_NAME.search(low)
    return -_SIGNAL_NUMBERS[name.group(1)] if name else None


def _code_kind(code: int) -> str | None:
    """A launcher's report of a code: SIGKILL and SIGSEGV have kinds of their own, any other
    non-zero code or signal is an exit (the process's own abort says `fatal` in its words)."""
    if code in (137, -9):
        return "killed"
    if code in (139, -11):
        return "segfault"
    return None if code == 0 else "exit"


def _signal_kind(number: int) -> str:
    return {9: "killed", 11: "segfault"}.get(number, "exit")


def exits(message: str, low: str) -> list[Found]:
    """Exit codes and signals: `exited with exitcode 137 (signal 9)`, `exitcode: -11`,
    `Exited with exit code 1`, `died with <Signals.SIGKILL: 9>`, `Killed`, `Segmentation fault`."""
    if holds_any(low, _TEARDOWN):
        return []
    found: list[Found] = []
    code = _EXIT_CODE.search(low)
    if code:
        value = int(code.group(1))
        kind = _code_kind(value)
        if kind:
            found.append((kind, value, None))
    number = _SIGNAL_NUMBER.search(low)
    if number:
        value = int(next(g for g in number.groups() if g is not None))
        found.append((_signal_kind(value), value if not code else int(code.group(1)), None))
    else:
        name = _SIGNAL_NAME.search(low)
        if name:
            value = _SIGNAL_NUMBERS[name.group(1)]
            found.append((_signal_kind(value), int(code.group(1)) if code else -value, None))
    if "segmentation fault" in low or "segfault" in low:
        found.append(("segfault", None, None))
    if "killed" in low and "killed process" not in low and _killed_word(message):
        found.append(("killed", None, None))
    if not found and low.startswith("srun: error:") and low.endswith(": terminated"):
        found.append(("exit", -15, None))  # srun's "tasks 0-57: Terminated" (SIGTERM)
    if not found and ("cancelled at" in low or ("*** " in low and " due to " in low)):
        found.append(_cancelled(low))
    if not found and (holds_any(low, _DIED) or "non-zero exit" in low):
        found.append(("exit", None, None))
    return found


# Slurm's `*** STEP 1.0 ON node CANCELLED AT <time> DUE TO <reason> ***`, by its reason.
_CANCEL_REASONS = (
    ("due to time limit", "killed"),
    ("due to preemption", "evicted"),
    ("due to job requeue", "evicted"),
    ("due to node fail", "node_state"),
    ("not ending with signals", "node_state"),
)


def _cancelled(low: str) -> Found:
    for reason, kind in _CANCEL_REASONS:
        if reason in low:
            return (kind, None, None)
    return ("exit", None, None)


def _killed_word(message: str) -> bool:
    """`Killed` as a shell or srun prints it (a word of its own), not "killed by the user"."""
    for piece in (" Killed", ": Killed", "\tKilled"):
        i = message.find(piece)
        if i >= 0:
            tail = message[i + len(piece) : i + len(piece) + 2]
            return tail[:1] in ("", " ", ".", "\t", "(")
    return message.startswith("Killed")


# --- memory ----------------------------------------------------------------------------------

_GPU_OOM = (
    "cuda out of memory",
    "cuda failure 'out of memory'",
    "failed to cuda calloc",
    "failed to cuda malloc",
    "outofmemoryerror",
    "cuda error: out of memory",
    "cudaerrormemoryallocation",
    "hip out of memory",
    "cublas_status_alloc_failed",
    "resource_exhausted: out of memory",
    "out of memory on device",
    "nccl_ret_out_of_memory",
)
_HOST_OOM = (
    "out of memory: killed process",
    "killed process",
    "oom-kill",
    "oom_kill",
    "oom-killer",
    "oomkilled",
    "memory cgroup out of memory",
    "out of memory",
    "out_of_memory",
    "oom_reaper",
    "defaultcpuallocator: can't allocate memory",
)


def memory(message: str, low: str) -> list[Found]:
    for stem in _GPU_OOM:
        if stem in low:
            return [("gpu_oom", None, None)]
    for stem in _HOST_OOM:
        if stem in low:
            return [("oom", None, None)]
    return []


# --- GPU: Xid ---------------------------------------------------------------------------------

_XID = re.compile(r"\bxid(?: \((?:pci:)?[0-9a-f:.]{1,40}\))?[ =:]{1,3}(\d{1,4})\b")
# What some drivers print instead of the Xid's number: the Xid it stands for.
_XID_WORDS = (("fallen off the bus", 79),)


def xid(message: str, low: str) -> list[Found]:
    match = _XID.search(low)
    if not match:
        for words, number in _XID_WORDS:
            if words in low and "nvrm" in low:
                return [("xid", number, None)]
        return []
    found: list[Found] = [("xid", int(match.group(1)), None)]
    if "nvlink" in low:
        found.append(("link", int(match.group(1)), None))
    return found


# --- fatal errors ----------------------------------------------------------------------------

_FATAL = (
    "cuda failure",
    "taking the entire process down",
    "fatal python error",
    "terminate called",
    "aborted (core",
    "abort()",
    "core dumped",
    "cuda error",
    "illegal memory access",
    "device-side assert",
    "cublas_status",
    "cudnn_status",
    "nccl error",
    "unhandled cuda error",
    "uncorrectable ecc",
    "bus error",
    "floating point exception",
    "illegal instruction",
    "what():",
    "enforce fail",
    "caught signal",
    "cuda driver error",
    "cudaerrorlaunchfailure",
    "fatal error",
    "kernel panic",
)


# glog's severity letter: F(atal) is the line before the process aborts itself.
_GLOG_FATAL = re.compile(r"\[F(?:\d{3,4})? |F\d{4} \d\d:\d\d")


def fatal(message: str, low: str) -> list[Found]:
    for stem in _FATAL:
        if stem in low:
            return [("fatal", None, None)]
    if _GLOG_FATAL.match(message):
        return [("fatal", None, None)]
    return []


_EXIT_STEMS = ("exit", "sig", "killed", "segm", "segfault", "return code", "terminated", "died")
_EXIT_STEMS += ("has failed.", "cancelled at", " due to ", "non-zero", *_DIED)
# (stems that must be present, reader), in the order their kinds are reported.
READERS = (
    (("xid", "fallen off the bus"), xid),
    (("memory", "oom", "killed process", "cpuallocator", "calloc", "malloc"), memory),
    (_EXIT_STEMS, exits),
    ((*_FATAL, "[f"), fatal),
    *comms.READERS,
    *cluster.READERS,
)


# Readers whose stems few lines hold: one search for all their stems at once (a trie) spares
# most lines a hundred substring tests; a line that holds one is offered to each as before.
_SELDOM = frozenset(
    {xid, memory, fatal, comms.rendezvous, comms.desync, comms.comm_check, comms.mismatch}
    | {comms.straggler, cluster.node_state, cluster.evicted, cluster.checkpoint}
)
_SELDOM_STEMS = re.compile(
    trie_pattern(tuple(stem for stems, reader in READERS if reader in _SELDOM for stem in stems))
)
_GATED = tuple((stems, reader, reader in _SELDOM) for stems, reader in READERS)


# Where a message stops stating and starts guessing: Ray lists "potential root causes (1) The
# process is killed by SIGKILL by OOM killer ..." after every worker death (Ray 2.60: "Some
# common causes include: (1) the process was killed by the OOM killer ... (3) the worker
# crashed unexpectedly due to SIGSEGV").
_GUESSES = (
    "potential root cause",
    "possible root cause",
    "possible cause",
    "may be caused by",
    "common causes include",
    "causes include:",
)
_GUESSED = "cause"


def classify(message: str) -> list[Found]:
    """Every (kind, code, peer) the message states, each kind once."""
    low = message.lower()
    if _GUESSED in low:  # every guess holds it: one test for most lines, not six
        for guess in _GUESSES:
            at = low.find(guess)
            if at >= 0:
                message, low = message[:at], low[:at]
    found: list[Found] = []
    seldom = _SELDOM_STEMS.search(low) is not None
    for stems, reader, gated in _GATED:
        if gated and not seldom:
            continue
        for stem in stems:
            if stem in low:
                found += reader(message, low)
                break
    if len(found) < 2:
        return found
    seen: set[str] = set()
    unique = []
    for item in found:
        if item[0] not in seen:
            seen.add(item[0])
            unique.append(item)
    return unique
