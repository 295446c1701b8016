"""The step-progress chart of the cluster page, built as data (plotly's figure JSON): pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

WINDOW = timedelta(hours=1)
MAX_POINTS = 720  # one hour at a 5 s period; longer series are thinned evenly


def _plotly_time(at: datetime) -> str:
    """UTC as plotly's date axis reads it: no offset (plotly.js does not parse "+00:00")."""
    if at.tzinfo is not None:
        at = at.astimezone(UTC).replace(tzinfo=None)
    return at.isoformat(sep=" ", timespec="milliseconds")


def step_progress_figure(
    samples: Sequence[tuple[datetime, int]],
    *,
    now: datetime,
    raises: Sequence[datetime] = (),
) -> dict:
    """Global step over the last hour, one point per period, raises marked."""
    start = now - WINDOW
    points = sorted((at, step) for at, step in samples if start <= at <= now)
    if len(points) > MAX_POINTS:
        stride = len(points) / MAX_POINTS
        points = [points[int(i * stride)] for i in range(MAX_POINTS - 1)] + [points[-1]]
    data: list[dict] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "global step",
            "x": [_plotly_time(at) for at, _ in points],
            "y": [step for _, step in points],
            "line": {"shape": "hv"},
            "marker": {"size": 4},
            "hovertemplate": "step %{y}<br>%{x}<extra></extra>",
        }
    ]
    shown = [at for at in raises if start <= at <= now]
    if shown:
        top = max((step for _, step in points), default=0)
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "raise",
                "x": [_plotly_time(at) for at in shown],
                "y": [top for _ in shown],
                "marker": {"symbol": "x", "size": 10, "color": "#f85149"},
                "hovertemplate": "raised %{x}<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": {
            "height": 220,
            "margin": {"l": 50, "r": 10, "t": 10, "b": 30},
            "xaxis": {
                "range": [_plotly_time(start), _plotly_time(now)],
                "type": "date",
                "title": {"text": "UTC"},
            },
            "yaxis": {"title": {"text": "step"}, "rangemode": "tozero"},
            "showlegend": False,
        },
    }
