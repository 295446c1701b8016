"""The rank timeline as a plotly figure (a plain dict), drawn by plotly's basic bundle
(scatter and bar only, ~1/4 of the full library).

Up to DOTS_UP_TO ranks: one dot per rank (rank on the y axis, last completed step on the x
axis), one trace per status so the legend explains the colours, suspects ringed and named
beside their dot. Past that, dots would overlap into a smear, so ranks are grouped: one
horizontal bar per (last step, state), as long as the number of ranks in it (log scale, so
one rank among 4,095 still shows), its ranks written on it and suspects named."""

from __future__ import annotations

import math

from analysis import rankview
from analysis.diagnosis import Diagnosis
from analysis.rankview import MAX_GROUPS, GroupView, RankOverview, rank_groups  # noqa: F401 (MAX_GROUPS, rank_groups: re-exported)
from analysis.records import RankRow, RankStatus

# (legend label, colour, marker symbol) of every status, in legend order: a status without a
# style would draw its ranks nowhere (tests/readings/test_rank_timeline.py holds this complete).
STATUS_STYLE: dict[RankStatus, tuple[str, str, str]] = {
    RankStatus.IN_COLLECTIVE: ("waiting in a collective", "#4C78A8", "circle"),
    RankStatus.OUTSIDE: ("outside any collective", "#F58518", "diamond"),
    RankStatus.INIT: ("in init / rendezvous", "#B279A2", "square"),
    RankStatus.NO_STACK: ("alive, no stack", "#9D9D9D", "circle-open"),
    RankStatus.LOG_ONLY: ("seen in logs only", "#72B7B2", "circle"),
    RankStatus.EXITED: ("exited", "#E45756", "x"),
    RankStatus.MISSING: ("missing", "#E45756", "x-open"),
    # Not missing, not a suspect: nothing was collected about them (a node that gave nothing).
    RankStatus.UNOBSERVED: ("nothing collected", "#BAB0AC", "square-open"),
}
OTHER_STYLE = ("other", "#9D9D9D", "circle")
SUSPECT_COLOUR = "#D62728"
DOTS_UP_TO = 64
# Longest rank list written on a bar (the hover has it whole, up to the same cap x 8).
RANKS_TEXT_CHARS = 28


def rank_timeline_figure(diagnosis: Diagnosis, overview: RankOverview | None = None) -> dict:
    """The chart of a diagnosis; with its stored overview (analysis/rankview.py) the per-rank
    table is not read at all (a page of a 32,000-rank diagnosis reads only the overview)."""
    if overview is None:
        if len(diagnosis.per_rank) <= DOTS_UP_TO:
            return _dots(diagnosis, diagnosis.per_rank)
        overview = rankview.overview(diagnosis)
    if overview.total > DOTS_UP_TO:
        return _grouped(diagnosis, overview.groups, overview.total)
    return _dots(diagnosis, overview.first_rows)


def _title(diagnosis: Diagnosis, count: int) -> dict:
    last = diagnosis.last_completed_step
    return {
        "text": f"{count} ranks · last step completed by every rank: "
        f"{last if last is not None else '-'}",
        "font": {"size": 14},
        "x": 0,
        "xref": "paper",
        "xanchor": "left",
    }


def _dots(diagnosis: Diagnosis, rows: tuple[RankRow, ...]) -> dict:
    count = len(rows)
    known = [r.last_step for r in rows if r.last_step is not None]
    # Ranks with no step (missing, never started) sit left of every real step.
    floor = (min(known) - 1) if known else 0

    def step(row: RankRow) -> int:
        return row.last_step if row.last_step is not None else floor

    def markers(name: str, members: list[RankRow], marker: dict) -> dict:
        return {
            "type": "scatter",
            "mode": "markers",
            "name": f"{name} ({len(members)})",
            "x": [step(r) for r in members],
            "y": [r.rank for r in members],
            "text": [_hover(r) for r in members],
            "hoverinfo": "text",
            "marker": marker,
        }

    by_status: dict[RankStatus, list[RankRow]] = {}
    for row in rows:
        by_status.setdefault(row.status, []).append(row)
    traces = []
    for status, (label, colour, symbol) in STATUS_STYLE.items():
        members = by_status.get(status)
        if members:
            traces.append(markers(label, members, {"color": colour, "symbol": symbol, "size": 10}))
    suspects = [r for r in rows if r.suspect]
    if suspects:
        ring = {"color": SUSPECT_COLOUR, "symbol": "circle-open", "size": 20, "line": {"width": 2}}
        traces.append(markers("suspect", suspects, ring))
    # The label starts right of the ring (standoff), never on the marker.
    annotations = [
        {
            "x": step(r),
            "y": r.rank,
            "text": f"rank {r.rank}" + (f" ({plain(r.node)})" if r.node else ""),
            "showarrow": True,
            "arrowhead": 0,
            "ax": 70,
            "ay": 0,
            "standoff": 12,
            "xanchor": "left",
            "font": {"color": SUSPECT_COLOUR},
        }
        for r in suspects[:10]
    ]
    steps = [*known, floor]
    last = diagnosis.last_completed_step
    shapes = []
    if last is not None:
        shapes.append(
            {
                "type": "line",
                "x0": last,
                "x1": last,
                "yref": "paper",
                "y0": 0,
                "y1": 1,
                "line": {"color": "#888", "dash": "dot", "width": 1},
            }
        )
    return {
        "data": traces,
        "layout": {
            "title": _title(diagnosis, count),
            "xaxis": {
                "title": {"text": "last completed step"},
                "zeroline": False,
                "tickformat": "d",
                "dtick": 1 if max(steps) - min(steps) <= 20 else None,
                # Room on the right for the suspects' labels.
                "range": [min(steps) - 1, max(steps) + 1 + (1 if suspects else 0)],
            },
            "yaxis": {
                "title": {"text": "rank"},
                "autorange": "reversed",
                "dtick": 1 if count <= 32 else None,
            },
            "height": max(300, min(720, 90 + 26 * count)),
            "hovermode": "closest",
            "shapes": shapes,
            "annotations": annotations,
            # Above the plot, right: clear of the axis title and of the suspects' labels.
            "legend": {
                "orientation": "h",
                "x": 1,
                "xanchor": "right",
                "y": 1.02,
                "yanchor": "bottom",
            },
            "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
        },
    }


def _style(status: RankStatus | str | None) -> tuple[str, str, str]:
    if status is None:
        return OTHER_STYLE
    if not isinstance(status, RankStatus):
        status = RankStatus.read(status)
    return STATUS_STYLE.get(status, OTHER_STYLE)


def _group_label(g: GroupView) -> str:
    if g.status is None:
        return f"{g.folded} more groups"
    step = "no step" if g.step is None else f"step {g.step}"
    return f"{step} · {_style(g.status)[0]}"


def _grouped(diagnosis: Diagnosis, groups: tuple[GroupView, ...], total: int) -> dict:
    labels = [_group_label(g) for g in groups]
    counts = [g.count for g in groups]
    colours = [_style(g.status)[1] for g in groups]
    outlines = [SUSPECT_COLOUR if g.suspects else "rgba(0,0,0,0)" for g in groups]
    texts, hovers = [], []
    for g, n in zip(groups, counts, strict=True):
        ranks = g.ranks
        short = ranks if len(ranks) <= RANKS_TEXT_CHARS else ranks[: RANKS_TEXT_CHARS - 1] + "…"
        suspects = ", ".join(
            f"{rank}" + (f" ({plain(node)})" if node else "") for rank, node in g.suspects[:5]
        )
        texts.append(f"{n} · ranks {short}" + (f" · suspect {suspects}" if suspects else ""))
        hovers.append(f"{n} ranks: {ranks[: RANKS_TEXT_CHARS * 8]}")
    trace = {
        "type": "bar",
        "orientation": "h",
        "name": "ranks",
        "x": counts,
        "y": labels,
        "text": texts,
        "textposition": "outside",
        "cliponaxis": False,
        "hovertext": hovers,
        "hoverinfo": "text",
        "marker": {"color": colours, "line": {"color": outlines, "width": 3}},
    }
    top = max(counts) if counts else 1
    return {
        "data": [trace],
        "layout": {
            "title": _title(diagnosis, total),
            "xaxis": {
                "title": {"text": "ranks (log scale)"},
                "type": "log",
                # One rank must still be a visible bar; room on the right for the text.
                "range": [-0.35, math.log10(top) + 2.6],
                "dtick": 1,
            },
            "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
            "height": max(260, min(720, 110 + 34 * len(groups))),
            "showlegend": False,
            "margin": {"l": 20, "r": 20, "t": 40, "b": 40},
            "bargap": 0.25,
        },
    }


def _rank_where(row: RankRow) -> str:
    return f"{row.rank} ({plain(row.node)})" if row.node else f"{row.rank}"


def plain(text: str) -> str:
    """Evidence as text in a plotly label: plotly reads `<a href>`, `<b>`, `<br>` ... in every
    label as markup, and entities as the characters they name, so a bundle folder called
    `<a href=...>` shows as those characters, not as a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _hover(row: RankRow) -> str:
    parts = [f"rank {row.rank}"]
    if row.node:
        parts.append(plain(row.node))
    parts.append(f"step {row.last_step if row.last_step is not None else '-'}")
    if row.last_step_at:
        parts.append(row.last_step_at.isoformat())
    if row.frame:
        parts.append(plain(row.frame))
    if row.exit_code is not None:
        parts.append(f"exit {row.exit_code}")
    return "<br>".join(parts)
