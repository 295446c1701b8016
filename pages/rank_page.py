"""A rank's page ("Rank 3's log tail and lab-node-1's dmesg"): every line the snapshot holds
about the rank, each with its source, from the artifacts already collected, masked, for
responders only: its own log's tail, what the node's other logs say of it (the launcher's
exit line, an agent's, a shared stdout), the kernel's lines about its processes, and the
node's dmesg. Lines stamped before the job began are marked (analysis/jobtime.py).

The page's one read (`rank_evidence_page` -> `RankEvidencePage`); its view is
pages/guided.guided_rank."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from analysis import jobtime
from analysis.ranklines import Rank, RankLine, Text, lines_about
from analysis.records import RankRow
from analysis.signals.who import file_rank
from collectors import selectors as snapshot_selectors
from collectors.models import Artifact, Snapshot
from hangdesk.masking import mask_text
from incidents.models import Incident

# A log tail or dmesg shows at most this many of its last lines, read from its last bytes.
TAIL_LINES = 200
TAIL_BYTES = 256 * 1024
DMESG = "dmesg.txt"


@dataclass(frozen=True)
class Tail:
    """The shown end of one artifact: its masked lines, numbered as in the evidence viewer."""

    artifact: Artifact
    text: str
    first_line: int
    more: bool

    @property
    def name(self) -> str:
        return self.artifact.name


def tail_of(artifact: Artifact, lines: int = TAIL_LINES) -> Tail:
    """The last `lines` lines of an artifact (from its last TAIL_BYTES), masked, with the
    number of the first one in the whole artifact."""
    data = artifact.content
    start = max(0, len(data) - TAIL_BYTES)
    if start:
        start = data.find(b"\n", start) + 1 or len(data)  # a whole first line
    kept = data[start:].decode("utf-8", "replace").rstrip("\n").split("\n")
    more = start > 0 or len(kept) > lines
    skipped = max(0, len(kept) - lines)
    first = data.count(b"\n", 0, start) + skipped + 1
    text = "\n".join(mask_text(line) for line in kept[skipped:])
    return Tail(artifact, text, first, more)


def _numbered(tail: Tail, started, now) -> list[dict]:
    return [
        {
            "number": tail.first_line + i,
            "text": line,
            "before_job": jobtime.line_before_job(line, started, now),
        }
        for i, line in enumerate(tail.text.split("\n"))
        if tail.text
    ]


def _node_logging(snapshot: Snapshot, rank: int) -> str:
    """The node holding a log of `rank`, for a rank the verdict's table lacks ("" if none):
    from the logs' names alone."""
    names = Artifact.objects.filter(collection__snapshot=snapshot, name__startswith="logs/")
    for name, node in names.values_list("name", "collection__node_name").order_by(
        "collection__node_name", "name"
    ):
        if file_rank(name.removeprefix("logs/"))[0] == rank:
            return node
    return ""


def _own_logs(logs: list[Artifact], rank: int) -> list[Artifact]:
    return [a for a in logs if file_rank(a.name.removeprefix("logs/"))[0] == rank]


def _group(lines: list[RankLine], tails: dict[str, Tail]) -> list[dict]:
    """The lines about the rank, by source, in source order."""
    groups: dict[str, dict] = {}
    for line in lines:
        tail = tails[line.source]
        group = groups.setdefault(line.source, {"artifact": tail.artifact, "lines": []})
        group["lines"].append(line)
    return list(groups.values())


@dataclass(frozen=True)
class RankEvidencePage:
    incident: Incident
    snapshot: Snapshot
    rank: int
    row: RankRow | None  # the rank's row of the verdict's table (None: not in it)
    node: str
    pids: list[int]
    job_started: datetime | None
    own: list[dict]  # each of its own logs: {"tail", "lines"}
    about: list[dict]  # what the node's other logs say of it, by source
    kernel: list[RankLine]  # dmesg's lines about its processes
    dmesg: dict | None  # the node's dmesg: {"tail", "lines"}

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def rank_evidence_page(snapshot: Snapshot, rank: int) -> RankEvidencePage:
    """Everything the snapshot holds about one rank, each line with its source; `snapshot`
    with its incident, read `for_pages()`. The rank's row (one query unless the overview
    holds it) and its node's artifacts only (a query)."""
    diagnosis = snapshot.read_diagnosis()
    row = snapshot_selectors.rank_row(snapshot, rank)
    node = (row.node if row else None) or _node_logging(snapshot, rank)
    mine = list(
        Artifact.objects.filter(collection__snapshot=snapshot, collection__node_name=node)
        .order_by("name")
    ) if node else []  # fmt: skip
    logs = [a for a in mine if a.name.startswith("logs/")]
    own = _own_logs(logs, rank)
    started = diagnosis.job_started_at if diagnosis else None
    now = (diagnosis.collected_at if diagnosis else None) or snapshot.finished_at
    tails = {a.name: tail_of(a) for a in mine if a.name.startswith("logs/") or a.name == DMESG}
    others = [
        Text(a.name, tails[a.name].text, tails[a.name].first_line, kernel=a.name == DMESG)
        for a in mine
        if a.name in tails and a not in own
    ]
    who = Rank(
        rank=rank,
        node=node,
        local_rank=row.local_rank if row else None,
        pids={row.pid} if row and row.pid is not None else set(),
    )
    about = lines_about(who, others, job_started=started, now=now)
    dmesg = tails.get(DMESG)
    return RankEvidencePage(
        incident=snapshot.incident,
        snapshot=snapshot,
        rank=rank,
        row=row,
        node=node,
        pids=sorted(who.pids),
        job_started=started,
        own=[{"tail": tails[a.name], "lines": _numbered(tails[a.name], started, now)} for a in own],
        about=_group([line for line in about if line.source != DMESG], tails),
        kernel=[line for line in about if line.source == DMESG],
        dmesg={"tail": dmesg, "lines": _numbered(dmesg, started, now)} if dmesg else None,
    )
