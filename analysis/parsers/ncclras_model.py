"""What an ncclras report holds, typed: its communicators, the ranks it names (missing, dead,
failing, behind in a mismatch), the job processes it could not reach. Read by
`analysis.parsers.ncclras` (JSON) and `analysis.parsers.ncclras_text` (text)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TEXT = 8 << 20  # characters of one ncclras output read
MAX_COMMS = 4096
MAX_RANKS = 16384  # ranks kept per communicator (JSON lists every rank)
MAX_NAMED = 4096  # ranks named in the text's blocks


@dataclass(frozen=True)
class RasRank:
    """One rank (or, with rank None, one job process) RAS names."""

    rank: int | None  # within its communicator
    host: str | None
    pid: int | None
    missing: bool = False  # no data from it (unresponsive, or no longer a member)
    dead: bool = False  # RAS considers the process dead
    error: str = ""  # an initialisation or asynchronous error it reported, an abort
    ops: tuple[tuple[str, int], ...] = ()  # operations launched, per kind (JSON)
    behind: bool = False  # in a mismatch, it launched fewer operations than others
    line: str = ""


@dataclass(frozen=True)
class RasComm:
    name: str  # "#0-0" (text) or the hash (JSON)
    size: int | None
    status: str = ""  # RUNNING / INIT / FINALIZE / NOCOMM / ... as printed
    errors: tuple[str, ...] = ()  # OK / MISMATCH / INCOMPLETE / ERROR / ...
    ranks: tuple[RasRank, ...] = ()  # JSON: every rank; text: the ranks a block names
    # (operation, launched up to, ranks at that count); operation "" when not said.
    op_counts: tuple[tuple[str, int, int], ...] = ()
    hash: str | None = None


@dataclass(frozen=True)
class RasReport:
    format: str  # "json" | "text"
    version: str | None = None
    comms: tuple[RasComm, ...] = ()
    processes: tuple[RasRank, ...] = ()  # job processes missing data or dead (no rank)
    timeouts: int = 0
    problems: tuple[str, ...] = ()

    @property
    def world(self) -> int | None:
        sizes = [c.size for c in self.comms if c.size]
        return max(sizes) if sizes else None

    @property
    def ok(self) -> bool:
        """Every communicator OK and no process missing: RAS sees nothing wrong."""
        return (
            bool(self.comms)
            and not self.processes
            and all(c.errors == ("OK",) and not _named_trouble(c) for c in self.comms)
        )


def _named_trouble(comm: RasComm) -> bool:
    return any(r.missing or r.dead or r.error or r.behind for r in comm.ranks)
