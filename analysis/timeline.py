"""The rank timeline as a plotly figure (a plain dict): ranks on the y axis, last completed
step on the x axis, one trace per status so the legend explains the colours. Missing and
suspect ranks are marked. From 512 ranks on, WebGL (`scattergl`) keeps 4,096 points smooth."""

from __future__ import annotations

STATUS_STYLE = {
    "in_collective": ("waiting in a collective", "#4C78A8", "circle"),
    "outside": ("outside any collective", "#F58518", "diamond"),
    "init": ("in init / rendezvous", "#B279A2", "square"),
    "no_stack": ("alive, no stack", "#9D9D9D", "circle-open"),
    "log_only": ("seen in logs only", "#72B7B2", "circle"),
    "exited": ("exited", "#E45756", "x"),
    "missing": ("missing", "#E45756", "x-open"),
}
_WEBGL_FROM = 512


def timeline_figure(diagnosis: dict) -> dict:
    rows = diagnosis.get("per_rank") or []
    count = len(rows)
    large = count >= _WEBGL_FROM
    trace_type = "scattergl" if large else "scatter"
    known = [r["last_step"] for r in rows if r.get("last_step") is not None]
    # Ranks with no step (missing, never started) sit left of every real step.
    floor = (min(known) - 1) if known else 0
    traces = []

    def markers(name: str, members: list[dict], marker: dict) -> dict:
        return {
            "type": trace_type,
            "mode": "markers",
            "name": f"{name} ({len(members)})",
            "x": [r["last_step"] if r["last_step"] is not None else floor for r in members],
            "y": [r["rank"] for r in members],
            "text": [_hover(r) for r in members],
            "hoverinfo": "text",
            "marker": marker,
        }

    for status, (label, colour, symbol) in STATUS_STYLE.items():
        members = [r for r in rows if r["status"] == status]
        if members:
            # The usual state is a dense column; rare states must stand out of it.
            size = (3 if status == "in_collective" else 8) if large else 10
            traces.append(
                markers(label, members, {"color": colour, "symbol": symbol, "size": size})
            )
    suspects = [r for r in rows if r.get("suspect")]
    if suspects:
        ring = {
            "color": "#D62728",
            "symbol": "circle-open",
            "size": 16 if large else 20,
            "line": {"width": 2},
        }
        traces.append(markers("suspect", suspects, ring))
    # Name up to ten suspects on the plot itself: in 4,096 dots they must be findable.
    annotations = [
        {
            "x": r["last_step"] if r["last_step"] is not None else floor,
            "y": r["rank"],
            "text": f"rank {r['rank']}" + (f" ({r['node']})" if r.get("node") else ""),
            "showarrow": True,
            "arrowhead": 0,
            "ax": 60,
            "ay": 0,
            "font": {"color": "#D62728"},
        }
        for r in suspects[:10]
    ]
    steps = [*known, floor]
    shapes = []
    last = diagnosis.get("last_completed_step")
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
    title = (
        f"{diagnosis.get('classification', '?')}: {count} ranks, "
        f"last globally completed step {last if last is not None else '-'}"
    )
    return {
        "data": traces,
        "layout": {
            "title": {"text": title},
            "xaxis": {
                "title": {"text": "last completed step"},
                "zeroline": False,
                "tickformat": "d",
                "dtick": 1 if max(steps) - min(steps) <= 20 else None,
                "range": [min(steps) - 1, max(steps) + 1],
            },
            "yaxis": {
                "title": {"text": "rank"},
                "autorange": "reversed",
                "dtick": 1 if count <= 32 else None,
            },
            "height": max(320, min(900, 60 + 22 * count)),
            "hovermode": "closest",
            "shapes": shapes,
            "annotations": annotations,
            "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
        },
    }


def _hover(row: dict) -> str:
    parts = [f"rank {row['rank']}"]
    if row.get("node"):
        parts.append(str(row["node"]))
    parts.append(f"step {row['last_step'] if row.get('last_step') is not None else '-'}")
    if row.get("last_step_at"):
        parts.append(str(row["last_step_at"]))
    if row.get("frame"):
        parts.append(str(row["frame"]))
    if row.get("exit_code") is not None:
        parts.append(f"exit {row['exit_code']}")
    return "<br>".join(parts)
