"""What a page shows of the per-rank table without reading it whole: a compact overview,
built once when the diagnosis is stored (at 32,000 ranks the table is 12 MB of JSON, and
typing its rows alone took seconds of a page's time).

- counts and rank ranges per status ("in a collective: 0-16006, 16008-31999");
- the chart's groups (`rank_groups`, each with its compact ranks and first suspects);
- the rows a page lists at once: every suspect and missing rank (up to FLAGGED_ROWS), then the
  first FIRST_ROWS ranks in rank order (all of a small job's). The rest of the table is read
  a page at a time (collectors' paged rank table).

Pure: no Django. The stored form is plain JSON (`to_json` / `from_json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analysis.diagnosis import Diagnosis
from analysis.records import RankRow, RankStatus, as_int, as_opt_int, as_str, records
from analysis.stacks import compact_ranks

FLAGGED_ROWS = 500
FIRST_ROWS = 200
RANGES_CHARS = 400  # a status's ranges, written out up to this long
GROUP_RANKS_CHARS = 224  # a chart group's ranks, as long as its hover shows them
GROUP_SUSPECTS = 5
# Bars in the grouped view; the rest are folded into one "other" bar.
MAX_GROUPS = 24
# The chart's legend order (rank_timeline.STATUS_STYLE, held equal by
# tests/readings/test_rank_timeline.py).
STATUS_ORDER = (
    RankStatus.IN_COLLECTIVE,
    RankStatus.OUTSIDE,
    RankStatus.INIT,
    RankStatus.NO_STACK,
    RankStatus.LOG_ONLY,
    RankStatus.EXITED,
    RankStatus.MISSING,
    RankStatus.UNOBSERVED,
)


@dataclass(frozen=True)
class StatusRanges:
    status: str
    count: int
    ranges: str  # compact, cut at RANGES_CHARS with "…"

    @property
    def cut(self) -> bool:
        return self.ranges.endswith("…")


@dataclass(frozen=True)
class GroupView:
    """One bar of the grouped chart: ranks at one (last step, status)."""

    step: int | None
    status: str | None  # None: the folded tail
    count: int
    ranks: str  # compact, the first GROUP_RANKS_CHARS of it
    suspects: tuple[tuple[int, str | None], ...] = ()  # (rank, node), the first few
    folded: int = 0


@dataclass(frozen=True)
class RankOverview:
    total: int
    flagged: int  # suspects and missing ranks, however many
    by_status: tuple[StatusRanges, ...]
    groups: tuple[GroupView, ...]
    rows: tuple[RankRow, ...]  # flagged first (capped), then the first ranks by number

    @property
    def complete(self) -> bool:
        """Whether `rows` holds every rank (a small job)."""
        return self.total <= FIRST_ROWS

    @property
    def flagged_rows(self) -> tuple[RankRow, ...]:
        return tuple(r for r in self.rows if _flagged(r))

    @property
    def first_rows(self) -> tuple[RankRow, ...]:
        """The rows in rank order (all of them on a small job, else the first page's)."""
        return tuple(sorted({r.rank: r for r in self.rows}.values(), key=lambda r: r.rank))

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "flagged": self.flagged,
            "by_status": [
                {"status": s.status, "count": s.count, "ranges": s.ranges} for s in self.by_status
            ],
            "groups": [
                {
                    "step": g.step,
                    "status": g.status,
                    "count": g.count,
                    "ranks": g.ranks,
                    "suspects": [list(s) for s in g.suspects],
                    "folded": g.folded,
                }
                for g in self.groups
            ],
            "rows": [r.to_json() for r in self.rows],
        }

    @classmethod
    def from_json(cls, data: Any) -> RankOverview | None:
        if not isinstance(data, dict):
            return None
        return cls(
            total=as_int(data.get("total")),
            flagged=as_int(data.get("flagged")),
            by_status=tuple(
                StatusRanges(
                    as_str(s.get("status")), as_int(s.get("count")), as_str(s.get("ranges"))
                )
                for s in _dicts(data.get("by_status"))
            ),
            groups=tuple(
                GroupView(
                    step=as_opt_int(g.get("step")),
                    status=g.get("status") if isinstance(g.get("status"), str) else None,
                    count=as_int(g.get("count")),
                    ranks=as_str(g.get("ranks")),
                    suspects=tuple(
                        (as_int(s[0]), s[1] if isinstance(s[1], str) else None)
                        for s in g.get("suspects") or ()
                        if isinstance(s, list) and len(s) == 2
                    ),
                    folded=as_int(g.get("folded")),
                )
                for g in _dicts(data.get("groups"))
            ),
            rows=records(RankRow, data.get("rows")),
        )


def _dicts(value: object) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _flagged(row: RankRow) -> bool:
    return row.suspect or row.status is RankStatus.MISSING


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


@dataclass
class RankGroup:
    """Ranks at one (last step, status), for the grouped view."""

    step: int | None
    status: RankStatus | None  # None: the folded tail of groups
    ranks: list[int] = field(default_factory=list)
    suspects: list[RankRow] = field(default_factory=list)
    folded: int = 0  # how many groups the tail folds


def rank_groups(rows: tuple[RankRow, ...]) -> list[RankGroup]:
    """Ranks grouped by (last step, state), the most telling first: groups with suspects,
    then the rarer states, then the rest by size; at most MAX_GROUPS (the tail folded)."""
    groups: dict[tuple, RankGroup] = {}
    for row in rows:
        key = (row.last_step, row.status)
        group = groups.get(key)
        if group is None:
            group = groups[key] = RankGroup(row.last_step, row.status)
        group.ranks.append(row.rank)
        if row.suspect:
            group.suspects.append(row)
    order = list(STATUS_ORDER)

    def interest(g: RankGroup) -> tuple:
        return (
            not g.suspects,
            g.status is RankStatus.IN_COLLECTIVE,
            -len(g.ranks),
            order.index(g.status) if g.status in order else len(order),
        )

    ordered = sorted(groups.values(), key=interest)
    if len(ordered) > MAX_GROUPS:
        kept, rest = ordered[: MAX_GROUPS - 1], ordered[MAX_GROUPS - 1 :]
        folded = RankGroup(None, None, folded=len(rest))
        for g in rest:
            folded.ranks += g.ranks
            folded.suspects += g.suspects
        ordered = [*kept, folded]
    return ordered


def overview(diagnosis: Diagnosis) -> RankOverview:
    """The overview of a whole diagnosis (its every row read once)."""
    rows = diagnosis.per_rank
    by_status: dict[RankStatus, list[int]] = {}
    for row in rows:
        by_status.setdefault(row.status, []).append(row.rank)
    missing = RankStatus.MISSING  # _flagged inline: a call a row of 32,000
    flagged = [r for r in rows if r.suspect or r.status is missing]
    flagged.sort(key=lambda r: (not r.suspect, r.rank))
    shown = {id(r) for r in flagged[:FLAGGED_ROWS]}
    first = [r for r in rows[:FIRST_ROWS] if id(r) not in shown]
    groups = tuple(
        GroupView(
            step=g.step,
            status=None if g.status is None else str(g.status),
            count=len(g.ranks),
            ranks=compact_ranks(g.ranks)[:GROUP_RANKS_CHARS],
            suspects=tuple((r.rank, r.node) for r in g.suspects[:GROUP_SUSPECTS]),
            folded=g.folded,
        )
        for g in rank_groups(rows)
    )
    return RankOverview(
        total=len(rows),
        flagged=len(flagged),
        by_status=tuple(
            StatusRanges(str(status), len(ranks), _cut(compact_ranks(ranks), RANGES_CHARS))
            for status, ranks in sorted(by_status.items(), key=lambda kv: -len(kv[1]))
        ),
        groups=groups,
        rows=(*flagged[:FLAGGED_ROWS], *first),
    )
