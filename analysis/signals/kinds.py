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

from analysis.parsers import nccl
from analysis.signals import nodes

Found = tuple[str, int | None, int | None]  # (kind, code, peer)

# --- exit codes and signals ----------------------------------------------------------------

_EXIT_CODE = re.compile(
    r"(?:exit ?code|exit_code|exit status|return code|returncode|exited with code|"
    r"terminated with code|with exit code)[\s:=()]{0,12}(-?\d{1,4})\b"
)
_SIGNAL_NUMBER = re.compile(
    r"\bsignal:? (\d{1,2})\b|\bsignals\.sig[a-z]{2,6}: (\d{1,2})\b|received (\d{1,2}) death signal"
)
_SIGNAL_NAME = re.compile(r"\bsig(kill|segv|abrt|bus|fpe|ill|term|int|hup|quit|pipe)\b")
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
    if any(word in low for word in _TEARDOWN):
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
    if not found and any(word in low for word in _DIED):
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


def fatal(message: str, low: str) -> list[Found]:
    for stem in _FATAL:
        if stem in low:
            return [("fatal", None, None)]
    return []


# --- timeouts, connections ---------------------------------------------------------------------

_TIMEOUT = (
    "timed out",
    "timing out",
    "deadline exceeded",
    "deadline_exceeded",
    "timeouterror",
    "timeout at",
    "timeout after",
    "timeout exceeded",
    "timeout waiting",
    "timeout while",
    "wait timeout",
    "socket timeout",
    "read timeout",
    "write timeout",
    "connect timeout",
    "barrier timeout",
    "operation timeout",
    "timeout of ",
    "failed to pass monitoredbarrier",
    "detected by watchdog",
    "collective timeout",
    "watchdog caught",
    "watchdog timeout",
)
_CONNECTION = (
    "connection closed",
    "connection refused",
    "connection reset",
    "connection aborted",
    "connection was likely closed",
    "connection timed out",
    "connection lost",
    "lost connection",
    "broken pipe",
    "closed by remote peer",
    "closed by peer",
    "socket unexpectedly closed",
    "remote process exited",
    "got completion from peer",
    "no route to host",
    "network is unreachable",
    "econnreset",
    "econnrefused",
    "got 0 bytes",
    "peer closed",
    "unexpected eof",
    "software caused connection abort",
    "connection to the remote",
)


def _peer_rank(message: str) -> int | None:
    fact = nccl.peer_fact(message)
    return fact.peer_rank if fact is not None else None


def timeouts(message: str, low: str) -> list[Found]:
    if "set by environment" in low:
        return []
    for stem in _TIMEOUT:
        if stem in low:
            peer = _peer_rank(message) if "monitoredbarrier" in low else None
            return [("timeout", None, peer)]
    return []


def connections(message: str, low: str) -> list[Found]:
    for stem in _CONNECTION:
        if stem in low:
            return [("connection", None, _peer_rank(message))]
    return []


# --- rendezvous and communicator set-up ------------------------------------------------------

_RENDEZVOUS = (
    "rendezvous",
    "tcpstore",
    "diststoreerror",
    "c10d store",
    "store->",
    "store.wait",
    "store based barrier",
    "store_based_barrier",
    "init_process_group",
    "master_addr",
    "client socket",
    "server socket",
    "key-value store",
    "etcd",
    "address already in use",
    "eaddrinuse",
    "connectfullmesh",
)
_FAILED = (
    "error",
    "fail",
    "timed out",
    "timeout",
    "refused",
    "closed",
    "exception",
    "unable",
    "could not",
    "cannot",
    "not reach",
    "exceeded",
    "in use",
    "reset",
    "mismatch",
    "did not",
)
_INIT = (
    "ncclinternalerror",
    "internal error",
    "ncclsystemerror",
    "unhandled system error",
    "ncclinvalidusage",
    "invalid usage",
    "bootstrap",
    "socketstartconnect",
    "socketpollconnect",
    "socketfinalizeaccept",
    "ncclcomminitrank",
    "ncclcommsplit",
    "comm init",
    "init failed",
    "no socket interface",
    "unable to find address",
    "failed to initialize nccl",
    "ncclgetuniqueid",
    "setting up nccl communicator",
    "proxy service",
    "proxy connect",
    "operation connect",
)
# NCCL's error unwinding (`NCCL INFO init.cc:1089 -> 3`): through the set-up code, set-up failed.
_UNWIND = re.compile(r"\b(?:init|bootstrap|proxy|transport|group)\.cc:\d{1,6} -> ([1-9]\d{0,2})\b")


def rendezvous(message: str, low: str) -> list[Found]:
    if not any(topic in low for topic in _RENDEZVOUS):
        return []
    if not any(word in low for word in _FAILED):
        return []  # "Rendezvous complete for workers": the rendezvous worked
    fact = nccl.peer_fact(message) if "ncclUniqueId from [" in message else None
    return [("rendezvous", None, fact.peer_rank if fact else None)]


def communicator_init(message: str, low: str) -> list[Found]:
    """NCCL's set-up of a communicator failing: its internal and system errors, bootstrap and
    socket set-up, ncclCommInitRank. A line needs both NCCL and a failure in it."""
    if "nccl" not in low:
        return []
    if " -> " in low and _UNWIND.search(low):
        return [("init", None, None)]
    if "nccl warn" not in low and not any(word in low for word in _FAILED):
        return []
    for stem in _INIT:
        if stem in low:
            return [("init", None, None)]
    return []


# --- desync and mismatch -----------------------------------------------------------------------

_BRACKET_RANKS = re.compile(r"\[(\d{1,7}(?:, \d{1,7}){0,63})\] ")
_DESYNC_KEYS = (
    "] finished collective #",
    "] joined but didn't finish collective #",
    "] are the lagging ranks",
)


_MISSING_RANKS = re.compile(r"\[missing ranks: (\d{1,7}(?:, ?\d{1,7}){0,63})\]")
# Horovod's stall inspector: some ranks submitted a collective the others never did.
_STALLED = ("by subset of ranks", "stalled ops", "ready ranks:")


def desync(message: str, low: str) -> list[Found]:
    """Who a report says is missing from a collective the others joined: PyTorch's desync
    report, Horovod's `[missing ranks: 1]`, the monitored barrier's send/recv errors."""
    found: list[Found] = []
    missing = _MISSING_RANKS.search(message) if "[missing ranks:" in message else None
    if missing:
        ranks = missing.group(1).replace(",", " ").split()[:16]
        return [("desync", None, int(r)) for r in ranks]
    if any(stem in low for stem in _STALLED):
        return [("desync", None, None)]
    if "waiting for send/recv from rank" in low:
        return [("desync", None, _peer_rank(message))]
    for key in _DESYNC_KEYS:
        i = message.find(key)
        if i < 0:
            continue
        opening = message.rfind("[", max(0, i - 600), i)
        match = _BRACKET_RANKS.match(message, opening, i + 2) if opening >= 0 else None
        if match:
            found += [("desync", None, int(r)) for r in match.group(1).split(", ")[:16]]
    return found


_UCC_CHECK = re.compile(r"problematic ranks: \[ ?(\d{1,7}(?:,? \d{1,7}){0,63}) ?\]")


def comm_check(message: str, low: str) -> list[Found]:
    """ProcessGroupUCC's comms check: `Aborting comms #12 (op=ALLTOALL_BASE) due to the
    problematic ranks: [ 0 ]`, the ranks that never posted the collective."""
    match = _UCC_CHECK.search(message)
    if not match:
        return []
    ranks = match.group(1).replace(",", " ").split()[:16]
    return [("desync", None, int(r)) for r in ranks]


_MISMATCH = (
    "mismatch between collectives",
    "inconsistent collective",
    "ranks ran different collectives",
    "collective mismatch",
    "mismatched collective",
)


def mismatch(message: str, low: str) -> list[Found]:
    for stem in _MISMATCH:
        if stem in low:
            return [("mismatch", None, None)]
    if "collectivefingerprint(" in low and low.count("collectivefingerprint(", 0, 20000) >= 2:
        return [("mismatch", None, None)]
    return []


# --- links, nodes, evictions, stragglers -------------------------------------------------------

_LINK_TOPIC = (
    "mlx5",
    "infiniband",
    "nvlink",
    " ib",
    "ib0",
    "ibv_",
    "hca",
    "rdma",
    "nic link",
    "net/ib",
)
_LINK_STATE = (
    "link down",
    "link is down",
    "linkdown",
    "port state change",
    "state: down",
    "down",
    "error",
    "fatal",
    "catastrophic",
    "syndrome",
    "retry",
    "flap",
    "inactive",
    "unplugged",
    "fail",
    "port error",
    "async event",
    "completion with error",
)
_IB_RETRY = ("status=12", "retry_exc_err", "transport retry counter exceeded", "vendor err 129")


def link(message: str, low: str) -> list[Found]:
    if any(stem in low for stem in _IB_RETRY):
        return [("link", None, None)]
    if not any(topic in low for topic in _LINK_TOPIC):
        return []
    if "nccl info" in low:
        return []  # "NET/IB : Using [0]mlx5_0:1/IB": configuration, not a fault
    return [("link", None, None)] if any(state in low for state in _LINK_STATE) else []


_NODE_STATE = (
    "kill task failed",
    "reason set to",
    "node failure",
    "nodestatusunknown",
    "stopped posting node status",
    "node has crashed",
    "node crashed",
    "not responding",
    "notready",
    "not ready",
    "state=down",
    "state=drain",
    "state=fail",
    "drained",
    "draining",
    "node_fail",
    "marked dead",
    "is dead",
    "kill task failed",
    "nodelost",
    "node lost",
    "down*",
    "drain*",
    "unhealthy",
)
_NODE_TOPIC = ("node", "slurmctld", "kubelet", "raylet", "host")


def node_state(message: str, low: str) -> list[Found]:
    if not any(state in low for state in _NODE_STATE):
        return []
    if any(t in low for t in _NODE_TOPIC) or "kill task failed" in low:
        return [("node_state", None, None)]
    return []


def table_row(message: str, low: str) -> list[Found]:
    """A row of `kubectl get nodes/pods`, `sinfo`: a cell of its own says the state."""
    kind = nodes.row_state(message)[0]
    return [(kind, None, None)] if kind else []


_EVICTED = (
    "evict",
    "preempt",
    "spot interruption",
    "spot instance interruption",
    "low on resource",
)


def evicted(message: str, low: str) -> list[Found]:
    return [("evicted", None, None)] if any(stem in low for stem in _EVICTED) else []


def straggler(message: str, low: str) -> list[Found]:
    facts = nccl.slow_facts(message)
    if facts:
        return [("straggler", None, fact.rank) for fact in facts[:16]]
    return []


# --- what is not a failure: checkpoints, NCCL's configuration ----------------------------------

_CHECKPOINT_TOPIC = ("checkpoint", "torch.save", "dcp.save", "state dict", "state_dict")
_CHECKPOINT_BEGINS = (
    "saving",
    "save",
    "writing",
    "checkpointing",
    "persisting",
    "storing",
    "getting",  # torchtune gathers the full state dict before it writes it
    "retrieving",
    "gathering",
    "consolidating",
)
_CHECKPOINT_DONE = ("saved", "finished", "completed", "done", "success", "load", "resum", "restor")


def checkpoint(message: str, low: str) -> list[Found]:
    if not any(topic in low for topic in _CHECKPOINT_TOPIC):
        return []
    if not any(word in low for word in _CHECKPOINT_BEGINS):
        return []
    if any(word in low for word in _CHECKPOINT_DONE) or ("took" in low and "sav" in low):
        return []  # the save is over (a phase of it that took a while is not)
    return [("checkpoint", None, None)]


_CONFIG_WORDS = (" using ", "no device found", "plugin", "nccl version")


def nccl_config(message: str, low: str) -> list[Found]:
    """What NCCL chose: a variable it was given, a version, a plugin, the network it uses (or
    the lack of one: `NET/IB : No device found.` sends it over sockets)."""
    if "set by environment to" in low or nccl.nccl_config_fact(message) is not None:
        return [("nccl_config", None, None)]
    if "nccl info" in low and any(word in low for word in _CONFIG_WORDS):
        return [("nccl_config", None, None)]
    return []


_TABLE_STEMS = ("notready", "unknown", "down", "drain", "fail", "evicted", "preempted", "error")
_TABLE_STEMS += ("crashloopbackoff", "oomkilled")
_DESYNC_STEMS = ("] finished collective", "] joined but", "lagging ranks", "missing ranks:")
_DESYNC_STEMS += (*_STALLED, "send/recv from rank")
_EXIT_STEMS = ("exit", "sig", "killed", "segm", "segfault", "return code", "terminated", "died")
_EXIT_STEMS += ("has failed.", "cancelled at", " due to ", *_DIED)
# (stems that must be present, reader), in the order their kinds are reported.
READERS = (
    (("xid", "fallen off the bus"), xid),
    (("memory", "oom", "killed process", "cpuallocator"), memory),
    (_EXIT_STEMS, exits),
    (_FATAL, fatal),
    (("tim", "deadline", "monitoredbarrier", "watchdog"), timeouts),
    (
        ("conn", "pipe", "peer", "unreachable", "route", "eof", "got 0 bytes", "econn"),
        connections,
    ),
    (_RENDEZVOUS, rendezvous),
    (("nccl",), communicator_init),
    (_DESYNC_STEMS, desync),
    (("problematic ranks",), comm_check),
    (("mismatch", "inconsistent", "different collectives", "fingerprint"), mismatch),
    (("rnk", "ranks with lowest", "straggler"), straggler),
    (_LINK_TOPIC + _IB_RETRY, link),
    (_NODE_STATE, node_state),
    (_TABLE_STEMS, table_row),
    (_EVICTED, evicted),
    (_CHECKPOINT_TOPIC, checkpoint),
    (("nccl info", "nccl version", "set by environment"), nccl_config),
)
_ALL_STEMS = tuple(dict.fromkeys(stem for stems, _ in READERS for stem in stems))


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


def classify(message: str) -> list[Found]:
    """Every (kind, code, peer) the message states, each kind once."""
    low = message.lower()
    for guess in _GUESSES:
        at = low.find(guess)
        if at >= 0:
            message, low = message[:at], low[:at]
    found: list[Found] = []
    for stems, reader in READERS:
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


# Short pieces of every stem above (tests/analysis/test_signals.py holds each stem to contain
# one): a line with none of them states nothing `classify` or the exception reader can find.
# Most lines of a log have none; checking these is the whole cost of reading them.
TRIGGERS = (
    "err",
    "fail",
    "nccl",
    "tim",
    "exit",
    "kill",
    "sig",
    "oom",
    "memor",
    "conn",
    "exception",
    "abort",
    "fatal",
    "terminat",
    "dead",
    "died",
    "crash",
    "store",
    "rendezv",
    "socket",
    "peer",
    "down",
    "node",
    "state",
    "ready",
    "drain",
    "lost",
    "xid",
    "fallen",
    "pipe",
    "route",
    "unreach",
    "eof",
    "got 0",
    "etcd",
    "master_addr",
    "init_process",
    "eaddrinuse",
    "address already",
    "collective",
    "joined but",
    "stalled",
    "problematic",
    "send/recv",
    "barrier",
    "fingerprint",
    "mismatch",
    "inconsistent",
    "rnk",
    "straggl",
    "mlx5",
    "infiniband",
    " ib",
    "ib0",
    "ibv_",
    "hca",
    "rdma",
    "nic link",
    "net/ib",
    "nvlink",
    "status=12",
    "retry",
    "responding",
    "unknown",
    "reason set",
    "unhealthy",
    "evict",
    "preempt",
    "spot",
    "low on resource",
    "checkpoint",
    "torch.save",
    "dcp.save",
    "set by environment",
    "core dump",
    "panic",
    "what():",
    "assert",
    "illegal",
    "floating point",
    "cublas",
    "cudnn",
    "uncorrectable",
    "cpuallocator",
    "deadline",
    "watchdog",
    "return code",
    "seg",
    "cancel",
    " due to ",
    "interrupt",
    "stopiteration",
    "with lowest",
    "missing ranks",
    "lagging",
    "subset of",
    "traceback",  # a traceback's frames and quoted source must be seen to be skipped
    'file "',
)


def trie_pattern(words: tuple[str, ...]) -> str:
    """One expression that finds any of `words`, factored as a trie (`e(?:rr|xit|...)`): each
    position of a line costs one branch per first letter instead of one try per word, and
    with no repetition at all it is linear. A word that is a prefix of another suffices."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node:
            return ""
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items())]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


_TRIGGER = re.compile(trie_pattern(TRIGGERS))


def may_say_anything(low: str) -> bool:
    """A cheap first look: could `classify` (or the exception reader) find anything in this
    lower-cased line?"""
    return _TRIGGER.search(low) is not None
