"""Ranks that left, and how we know: a launcher's exit line, a zombie, or a line of the rank
itself saying it was killed, segfaulted or exited; each marked when it did not fail first (the
launcher stopped it, or it went down after timing out waiting for another rank: a victim).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from analysis.ranks import TERMINATED_BY_LAUNCHER, ParsedSnapshot


@dataclass(frozen=True)
class Departure:
    """A rank that left: how we know, and whether the launcher stopped it (a victim)."""

    rank: int
    reason: str
    line: str
    exit_code: int | None
    stopped_by_launcher: bool
    at: datetime | None = None


def departures_of(snap: ParsedSnapshot) -> dict[int, Departure]:
    gone: dict[int, Departure] = {}
    for rank, state in snap.ranks.items():
        if state.process_seen:
            continue
        if state.exit_code is not None or state.exit_line:
            stopped = state.stopped_by_launcher or state.exit_code in TERMINATED_BY_LAUNCHER
            reason = exit_reason(state.exit_code) if state.exit_code is not None else "it failed"
            gone[rank] = Departure(
                rank, reason, state.exit_line, state.exit_code, stopped, state.exited_at
            )
        elif state.state == "Z":
            gone[rank] = Departure(rank, "its process is a zombie (exited)", "", None, False)
    return gone


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
