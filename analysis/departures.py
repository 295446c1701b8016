"""Ranks that left, and how we know: a launcher's exit line, a zombie, or a line of the rank
itself saying it was killed, segfaulted or exited; each marked when it did not fail first (the
launcher stopped it, or it went down after timing out waiting for another rank: a victim).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from itertools import compress
from operator import attrgetter, not_

from analysis.failure_index import FailureIndex
from analysis.signals import Signal
from analysis.signals.summary import RankSignals
from analysis.snapshot_parse import TERMINATED_BY_LAUNCHER, ParsedSnapshot

# What a rank's own line says when its process ended: killed, segfaulted, OOM-killed, exited
# non-zero. (A fatal error is not an end: a rank that reports one may hang on in its clean-up.)
ENDED = frozenset({"killed", "segfault", "oom", "exit"})
# What a rank says when it waited for another: a timeout, a lost connection, a desync or RAS
# report. A rank whose first failure is one of these went down as a victim, whatever it did
# after (the watchdog takes the process down; an exception quotes the timeout).
WAITED = frozenset({"timeout", "connection", "desync", "ras"})
_PROCESS_SEEN = attrgetter("process_seen")
_ENDED_HOW = {
    "killed": "its own log says it was killed",
    "segfault": "it segfaulted",
    "oom": "it was killed by the OOM killer",
    "exit": "it exited with an error",
}


@dataclass(frozen=True)
class Departure:
    """A rank that left: how we know, and whether the launcher stopped it (a victim)."""

    rank: int
    reason: str
    line: str
    exit_code: int | None
    stopped_by_launcher: bool  # it did not fail first: the launcher stopped it, or it waited
    at: datetime | None = None
    cause: str = ""  # the signal kind that says it ended, when a line of its own said so
    waited: bool = False  # its first failure was waiting for another rank (a timeout, a peer)


def departures_of(snap: ParsedSnapshot, failures: FailureIndex) -> dict[int, Departure]:
    gone: dict[int, Departure] = {}
    ranks = snap.ranks
    # The ranks without a live process, picked in C (a few of 32,000 at fleet scale).
    for rank in compress(ranks, map(not_, map(_PROCESS_SEEN, ranks.values()))):
        state = ranks[rank]
        if state.exit_code is not None or state.exit_line:
            stopped = state.stopped_by_launcher or state.exit_code in TERMINATED_BY_LAUNCHER
            reason = exit_reason(state.exit_code) if state.exit_code is not None else "it failed"
            gone[rank] = Departure(
                rank, reason, state.exit_line, state.exit_code, stopped, state.exited_at
            )
        elif state.state == "Z":
            gone[rank] = Departure(rank, "its process is a zombie (exited)", "", None, False)
    signalled = snap.signals.signalled
    # Only a rank with a line of an end's kind can have ended by its own word.
    for rank in dict.fromkeys(rank for rank, _ in failures.of_kinds(ENDED)):
        found, state = signalled[rank], snap.ranks.get(rank)
        if rank not in gone and not (state is not None and state.process_seen):
            ended = _ended(found)
            if ended is not None:
                reason = _ENDED_HOW[ended.kind]
                code = ended.code
                gone[rank] = Departure(
                    rank, reason, ended.text, code, False, ended.at, cause=ended.kind
                )
    return {rank: _as_victim(d, snap.signals.by_rank.get(rank)) for rank, d in gone.items()}


def _ended(found: RankSignals) -> Signal | None:
    for signal in found.failures:
        if signal.kind in ENDED and signal.code not in TERMINATED_BY_LAUNCHER:
            return signal
    return None


def waited(signal: Signal, found: RankSignals) -> bool:
    """Does this failure say its rank waited for another? (A line read as two kinds, an
    exception quoting a watchdog timeout, is a timeout.)"""
    if signal.kind in WAITED or signal.peer is not None:
        return True
    return any(s.kind in WAITED and s.text == signal.text for s in found.failures)


def _as_victim(gone: Departure, found: RankSignals | None) -> Departure:
    """A rank that first timed out or lost a peer, then left, is the others' victim."""
    first = found.first_failure if found is not None else None
    if gone.stopped_by_launcher or first is None or not waited(first, found):
        return gone
    return replace(
        gone,
        stopped_by_launcher=True,
        waited=True,
        reason=f"{gone.reason}, after it timed out waiting for another rank",
    )


EXIT_MEANING = {
    137: "SIGKILL, often the OOM killer",
    -9: "SIGKILL, often the OOM killer",
    139: "SIGSEGV, segfault",
    -11: "SIGSEGV, segfault",
    134: "SIGABRT, abort",
    -6: "SIGABRT, abort",
    -15: "SIGTERM, stopped by the launcher",
    143: "SIGTERM, stopped by the launcher",
    -7: "SIGBUS, often /dev/shm too small",
    135: "SIGBUS, often /dev/shm too small",
    1: "error exit",
}


def exit_reason(code: int) -> str:
    meaning = EXIT_MEANING.get(code, "")
    return f"it exited with code {code}" + (f" ({meaning})" if meaning else "")
