"""An ncclras report as signals: each missing, dead, failing or lagging rank RAS names (`ras`,
the rank as `peer`), or `ras_ok` when RAS sees every communicator OK.

RAS numbers ranks within each communicator. A rank of a communicator as large as the job is
the job's rank; any other is placed through its pid (the environment's, or the pid RAS gives
for the same process in the job-wide communicator), else named by its node only. A
communicator whose size the output does not give is taken at its word.
"""

from __future__ import annotations

from analysis.parsers.ncclras import TROUBLE_EVENTS, RasComm, RasEvent, RasRank, RasReport
from analysis.signals.model import TEXT_CAP, LineSource, Signal

MAX_RAS_SIGNALS = 512


def _world_pids(report: RasReport, world: int | None) -> dict[int, int]:
    pids: dict[int, int] = {}
    for comm in report.comms:
        if world is None or comm.size != world:
            continue
        for member in comm.ranks:
            if member.pid is not None and member.rank is not None:
                pids[member.pid] = member.rank
    return pids


def _describe(comm: RasComm | None, member: RasRank) -> str:
    if member.line:
        return member.line[:TEXT_CAP]
    what = (
        "dead"
        if member.dead
        else "missing"
        if member.missing
        else member.error or ("behind the others" if member.behind else "named")
    )
    where = f" (pid {member.pid} on {member.host})" if member.pid is not None else ""
    comm_text = f"communicator {comm.name} of {comm.size} ranks: " if comm is not None else ""
    rank = f"rank {member.rank}" if member.rank is not None else "a job process"
    return f"ncclras: {comm_text}{rank}{where} {what}"[:TEXT_CAP]


class _Placer:
    def __init__(self, report: RasReport, source: LineSource) -> None:
        self.source = source
        self.world = report.world
        self.pids = _world_pids(report, self.world)

    def rank(self, comm: RasComm | None, member: RasRank) -> int | None:
        if member.pid is not None:
            known = self.source.pid_ranks.get(member.pid, self.pids.get(member.pid))
            if known is not None:
                return known
        if comm is None or member.rank is None:
            return None
        if comm.size is None or comm.size == self.world:
            return member.rank
        return None

    def node(self, host: str | None) -> str | None:
        if not host:
            return self.source.node or None
        return self.source.hosts.get(host) or host


def _troubled(member: RasRank) -> bool:
    """Missing, dead, failing, or in the minority behind the others in a MISMATCH (normal on
    one look while counts advance; where a hang points when they froze: the engine compares
    two looks through the report)."""
    return member.missing or member.dead or bool(member.error) or member.behind


def ras_signals(report: RasReport | None, source: LineSource) -> list[Signal]:
    if report is None:
        return []
    place = _Placer(report, source)
    found: list[Signal] = []
    seen: set[tuple] = set()
    for comm, member in _named(report):
        peer = place.rank(comm, member)
        key = (peer, member.pid, member.host, member.rank if peer is None else None)
        if key in seen:
            continue
        seen.add(key)
        found.append(
            Signal(
                "ras",
                rank=None,
                node=place.node(member.host),
                text=_describe(comm, member),
                peer=peer,
                pid=member.pid,
            )
        )
        if len(found) >= MAX_RAS_SIGNALS:
            return found
    for comm in report.comms:
        if comm.errors != ("OK",) and not any(_troubled(m) for m in comm.ranks):
            found.append(Signal("ras", None, source.node or None, _comm_text(comm)))
    if report.ok:
        found.append(Signal("ras_ok", None, source.node or None, _ok_text(report)))
    return found


def _named(report: RasReport):
    for member in report.processes:
        yield None, member
    for comm in report.comms:
        for member in comm.ranks:
            if _troubled(member):
                yield comm, member


def _comm_text(comm: RasComm) -> str:
    status = f" {comm.status}" if comm.status else ""
    size = f" of {comm.size} ranks" if comm.size else ""
    return f"ncclras: communicator {comm.name}{size}{status} {','.join(comm.errors)}"[:TEXT_CAP]


def _ok_text(report: RasReport) -> str:
    statuses = sorted({c.status for c in report.comms if c.status})
    status = f" ({', '.join(statuses)})" if statuses else ""
    count = len(report.comms)
    return f"ncclras: {count} communicator group{'s' if count != 1 else ''}{status}, all OK"


def event_signal(event: RasEvent, source: LineSource) -> Signal | None:
    """A lifecycle event of `ncclras -m` about a peer in trouble (PEER_DEAD, ...)."""
    if event.event not in TROUBLE_EVENTS:
        return None
    peer = source.pid_ranks.get(event.pid) if event.pid is not None else None
    node = (source.hosts.get(event.host) or event.host) if event.host else source.node or None
    return Signal("ras", None, node, event.line[:TEXT_CAP], peer=peer, pid=event.pid)
