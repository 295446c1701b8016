"""Failure kinds of the communication between ranks: timeouts, lost connections, rendezvous
and communicator set-up failures, desync and mismatch reports, straggler detectors.

Readers of `analysis.signals.kinds.classify`: each takes a message and its lower-cased copy
and returns the (kind, code, peer) it states; plain lower-case stems first, then bounded or
anchored expressions.
"""

from __future__ import annotations

import re

from analysis.parsers import nccl
from analysis.signals.triggers import holds_any

Found = tuple[str, int | None, int | None]  # (kind, code, peer)

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
    "watchdog got stuck",
    "collective timeout",
    "watchdog caught",
    "watchdog timeout",
)
_CONNECTION = (
    "recv failed",
    "send failed",
    "could not receive",
    "could not send",
    "(!closed) failed",
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
    "operation=connect",
    "proxy call to rank",
)
# Functions of NCCL's socket layer (misc/socket.cc): their names are NCCL's alone.
_NCCL_SOCKET_CALLS = ("socketstartconnect", "socketpollconnect", "socketfinalizeaccept")
# NCCL's error unwinding (`NCCL INFO init.cc:1089 -> 3`): through the set-up code, set-up failed.
_UNWIND = re.compile(r"\b(?:init|bootstrap|proxy|transport|group)\.cc:\d{1,6} -> ([1-9]\d{0,2})\b")


def rendezvous(message: str, low: str) -> list[Found]:
    if not holds_any(low, _RENDEZVOUS):
        return []
    if not holds_any(low, _FAILED):
        return []  # "Rendezvous complete for workers": the rendezvous worked
    fact = nccl.peer_fact(message) if "ncclUniqueId from [" in message else None
    return [("rendezvous", None, fact.peer_rank if fact else None)]


# A WARN raised from NCCL's set-up code itself (`init.cc:981 NCCL WARN Invalid rank requested`,
# `bootstrap.cc:131 NCCL WARN ...`): whatever it says, the communicator's set-up failed there.
_SETUP_WARN = re.compile(r"\b(?:init|bootstrap)\.cc:\d{1,6} nccl warn ")


def communicator_init(message: str, low: str) -> list[Found]:
    """NCCL's set-up of a communicator failing: its internal and system errors, bootstrap and
    socket set-up, ncclCommInitRank. A line needs both NCCL and a failure in it; NCCL's own
    socket functions name NCCL by themselves (a paste that dropped the `NCCL WARN` prefix)."""
    if "nccl" not in low and not holds_any(low, _NCCL_SOCKET_CALLS):
        return []
    if " -> " in low and _UNWIND.search(low):
        return [("init", None, None)]
    if "nccl warn" in low and _SETUP_WARN.search(low):
        return [("init", None, None)]
    if "nccl warn" not in low and not holds_any(low, _FAILED):
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
    if holds_any(low, _STALLED):
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


def straggler(message: str, low: str) -> list[Found]:
    facts = nccl.slow_facts(message)
    if facts:
        return [("straggler", None, fact.rank) for fact in facts[:16]]
    return []


_CONNECTION_STEMS = ("conn", "pipe", "peer", "unreachable", "route", "eof", "got 0 bytes", "econn")
_CONNECTION_STEMS += ("recv failed", "send failed", "could not receive", "could not send")
_CONNECTION_STEMS += ("closed)", "remote pro")
_DESYNC_STEMS = ("] finished collective", "] joined but", "lagging ranks", "missing ranks:")
_DESYNC_STEMS += (*_STALLED, "send/recv from rank")
READERS = (
    (("tim", "deadline", "monitoredbarrier", "watchdog"), timeouts),
    (_CONNECTION_STEMS, connections),
    (_RENDEZVOUS, rendezvous),
    (("nccl", *_NCCL_SOCKET_CALLS), communicator_init),
    (_DESYNC_STEMS, desync),
    (("problematic ranks",), comm_check),
    (("mismatch", "inconsistent", "different collectives", "fingerprint"), mismatch),
    (("rnk", "ranks with lowest", "straggler"), straggler),
)
