"""Every line a snapshot holds about one rank, each with where it came from (issue 19).

A rank's own log rarely says why it left: the launcher's log does (`rank 3 (pid 6) exited with
exitcode 137 (signal 9)`), an elastic agent's, a shared stdout where the launcher prefixed its
lines (`[default3]:`), and the kernel's log names its process by pid (`Killed process 6`,
`python[6]: segfault`, `Xid ... pid=6`). This gathers them from the texts it is handed (the
node's other logs and its dmesg), tied to the rank as `analysis.signals` ties lines: by the
writer's prefix, by whom the message speaks of, by the pid it names; and each marked when it
is stamped before the job began (analysis/jobtime.py).

Pure: no Django. Each text comes as the tail the page shows, with the number of the line it
starts at, so a line links to the evidence viewer's line of the same number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from analysis import jobtime
from analysis.signals import LineSource, read_text, who

# Lines kept per source (the last ones): a shared stdout holds the rank's whole output.
LINES_PER_SOURCE = 200


@dataclass(frozen=True)
class Text:
    """One artifact's text as shown: its name, the text, and the line number it starts at."""

    name: str
    text: str
    first_line: int = 1
    kernel: bool = False  # a kernel log: lines are tied to the rank by pid only


@dataclass(frozen=True)
class RankLine:
    source: str  # the artifact's name: "logs//var/log/train/launcher.log", "dmesg.txt"
    number: int  # 1-based line number in the artifact
    text: str
    why: str  # how the line is tied to the rank: "rank 3 wrote it", "names rank 3", "pid 6"
    kind: str = ""  # what it says, when it says something the signals know (killed, oom, ...)
    before_job: bool = False


@dataclass
class Rank:
    """Who the lines are about: the rank, its local rank on its node and its pids (the one
    ps showed, and any a launcher line about it names)."""

    rank: int
    node: str = ""
    local_rank: int | None = None
    pids: set[int] = field(default_factory=set)


def lines_about(
    rank: Rank,
    texts: Iterable[Text],
    *,
    job_started: datetime | None = None,
    now: datetime | None = None,
) -> list[RankLine]:
    """The lines of `texts` about `rank`, logs first (they teach it the rank's pids), then
    kernel logs joined by those pids; in each source the last LINES_PER_SOURCE."""
    texts = sorted(texts, key=lambda t: t.kernel)
    found: list[RankLine] = []
    for text in texts:
        lines = _kernel_lines(rank, text) if text.kernel else _log_lines(rank, text, now)
        kinds = _kinds(rank, text, now)
        for number, line, why in lines[-LINES_PER_SOURCE:]:
            found.append(
                RankLine(
                    source=text.name,
                    number=number,
                    text=line,
                    why=why,
                    kind=kinds.get(number - text.first_line + 1, ""),
                    before_job=jobtime.line_before_job(line, job_started, now),
                )
            )
    return found


def _log_lines(rank: Rank, text: Text, now: datetime | None) -> list[tuple[int, str, str]]:
    """Lines a rank wrote into a shared log, or that speak of it; the pids they name for it
    are learnt (a launcher's `rank 3 (pid 6) exited ...`)."""
    out = []
    for offset, line in enumerate(text.text.split("\n")):
        why = _tie(rank, line)
        if why:
            out.append((text.first_line + offset, line, why))
            pid = who.named_pid(line)
            if pid is not None:
                rank.pids.add(pid)
    return out


def _tie(rank: Rank, line: str) -> str:
    """How `line` (of a log on the rank's node) is tied to the rank, or "" when it is not:
    a launcher's prefix says who wrote it; else the message says whom it speaks of."""
    if not line.strip():
        return ""
    wrote = who.writer(line)
    if wrote.start > 0 and (wrote.rank is not None or wrote.local is not None):
        mine = wrote.rank == rank.rank if wrote.rank is not None else wrote.local == rank.local_rank
        return f"rank {rank.rank} wrote it" if mine else ""
    if wrote.pid is not None and wrote.pid in rank.pids:
        return f"its process {wrote.pid} wrote it"
    named, local = who.subject(line[wrote.start :])
    named = named if named is not None else wrote.rank
    local = local if local is not None else wrote.local
    if named is not None:
        return f"names rank {rank.rank}" if named == rank.rank else ""
    if local is not None:
        return f"names local rank {local}" if local == rank.local_rank else ""
    pid = who.named_pid(line)
    if pid is not None and pid in rank.pids:
        return f"names its pid {pid}"
    return ""


def _kernel_lines(rank: Rank, text: Text) -> list[tuple[int, str, str]]:
    """Kernel lines naming one of the rank's processes (Killed process, segfault, Xid pid=)."""
    if not rank.pids:
        return []
    out = []
    for offset, line in enumerate(text.text.split("\n")):
        pid = who.named_pid(line)
        if pid is not None and pid in rank.pids:
            out.append((text.first_line + offset, line, f"its process {pid}"))
    return out


def _kinds(rank: Rank, text: Text, now: datetime | None) -> dict[int, str]:
    """Line (1-based in the text) -> the kind of signal it gives about the rank."""
    source = LineSource(
        path=text.name,
        node=rank.node,
        pid_ranks={pid: rank.rank for pid in rank.pids},
        collected_at=now,
    )
    return {s.line_no: s.kind for s in read_text(text.text, source) if s.rank == rank.rank}
