"""What the page's GPU strip shows of each rank's series (`gpushape.rows`): cells of time.

The strip compares ranks side by side, so its cells are TIME: a series that stopped twenty
minutes ago must end in empty cells beside ranks still reporting, and the newest point (the one
that matters at a hang) is always shown. Counting points would hide both. Pure: no Django.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter, sub
from typing import Any, Protocol


class GpuSeries(Protocol):  # gpushape.GpuSeries, as read here (gpushape imports this module)
    node: str
    source: str
    points: list[Any]  # gpushape.Point: .at (datetime or None), .util


SHOWN_POINTS = 60  # the strip on the page
JITTER_GAPS = 2.0  # a gap up to twice the series' median interval is jitter, not a stall
_AT, _UTIL = attrgetter("at"), attrgetter("util")


@dataclass(frozen=True)
class _Timed:
    stamps: list[float]  # oldest first
    utils: list[int | None]
    interval: float | None  # the widest gap that is still jitter; None: fewer than two points


def _window_key(series: GpuSeries) -> tuple[str, str]:
    # DCGM's times are one Prometheus's clock: one window for every row. nvidia-smi stamps each
    # node's samples with that node's own clock (local time, read as UTC), so nodes are not
    # compared: one window per node.
    return (series.source, "" if series.source == "dcgm" else series.node)


Cells = tuple[tuple[int | None, ...], float | None]  # oldest first; seconds a cell (None: points)


def shown_util(all_series: list[GpuSeries], tail: int) -> dict[int, Cells]:
    """id(series) -> the strip's cells for it, oldest first, at most SHOWN_POINTS, and how
    many seconds each spans (None when they are points counted, not times); only each
    series' last `tail` points are read."""
    shown: dict[int, Cells] = {}
    windows: dict[tuple[str, str], list[tuple[GpuSeries, _Timed]]] = defaultdict(list)
    last: list = []
    for series in all_series:
        if id(series) in shown:
            continue
        timed = _timed(series.points[-tail:], last)
        if timed is None:
            shown[id(series)] = (_by_count([p.util for p in series.points[-tail:]]), None)
        else:
            shown[id(series)] = ((), None)
            windows[_window_key(series)].append((series, timed))
    for members in windows.values():
        newest = max(t.stamps[-1] for _, t in members)
        oldest = min(t.stamps[0] for _, t in members)
        width = _cell_width(newest - oldest, [t.interval for _, t in members])
        for series, timed in members:
            shown[id(series)] = (_by_time(timed, newest, width), width)
    return shown


def _timed(points: list[Any], last: list) -> _Timed | None:
    """The points that carry times, when most do (the others cannot be placed); else None.
    This runs for every rank's series in the verdict: C-level passes (map, sorted, bisect),
    and the times read once for series sampled at the same instants (DCGM's GPUs all are, one
    datetime per instant: `last` holds the previous series' moments and what they gave)."""
    moments = list(map(_AT, points))
    if None in moments:
        kept = [p for p in points if p.at is not None]
        if not kept or len(kept) * 2 < len(points):
            return None
        points, moments = kept, list(map(_AT, kept))
    utils = list(map(_UTIL, points))
    if last and last[0] == moments:
        return _Timed(last[1].stamps, utils, last[1].interval)
    stamps = list(map(datetime.timestamp, moments))
    gaps = sorted(map(sub, stamps[1:], stamps[:-1]))
    first = bisect_right(gaps, 0.0)  # repeated or out-of-order times are no interval
    interval = None
    if first < len(gaps):
        limit = JITTER_GAPS * gaps[first + (len(gaps) - first) // 2]
        interval = gaps[bisect_right(gaps, limit) - 1]
    last[:] = [moments, _Timed(stamps, utils, interval)]
    return last[1]


def _cell_width(span: float, intervals: list[float | None]) -> float:
    """Wide enough for the window in SHOWN_POINTS cells, and never narrower than any series'
    interval: a gap no wider than a cell cannot leave an empty cell between two points."""
    width = max([span / (SHOWN_POINTS - 1)] + [i for i in intervals if i is not None])
    return width if width > 0 else 1.0


def _by_time(timed: _Timed, newest: float, width: float) -> tuple[int | None, ...]:
    """Cell k (0 the newest) spans `newest - (k +- 0.5) * width`; each cell shows the newest
    point inside it, a cell without one None ("no reading"). Points come oldest first."""
    stamps, cells = timed.stamps, []
    for back in range(SHOWN_POINTS):
        upper, lower = newest - (back - 0.5) * width, newest - (back + 0.5) * width
        if stamps[0] >= upper:
            break  # the series began after this cell
        at = bisect_left(stamps, upper) - 1
        cells.append(timed.utils[at] if stamps[at] >= lower else None)
    return tuple(reversed(cells))


def _by_count(utils: list[int | None]) -> tuple[int | None, ...]:
    """Untimed points: every step-th, counted back from the newest so it is always kept."""
    step = max(1, -(-len(utils) // SHOWN_POINTS))
    return tuple(utils[::-1][::step][:SHOWN_POINTS][::-1])
