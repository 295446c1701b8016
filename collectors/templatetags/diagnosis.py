"""Large tables rendered in Python: 4,096 rank rows through the template engine take seconds."""

from html import escape

from django import template
from django.utils.safestring import mark_safe

from analysis.records import RankRow, RankStatus
from analysis.verdict import Quote
from readings.rank_timeline import STATUS_STYLE

register = template.Library()


@register.filter
def quotable(item: Quote) -> bool:
    """Whether a verdict's evidence item is a line some stored artifact holds."""
    from collectors.evidence_viewer import is_linkable

    return is_linkable(item)


@register.filter
def rank_status_label(status: str) -> str:
    """A stored rank status as the chart's legend names it ("waiting in a collective")."""
    style = STATUS_STYLE.get(RankStatus.read(status))
    return style[0] if style else str(status)


DASH = "—"


@register.simple_tag
def rank_rows(rows: list[RankRow]):
    """<tr> elements for the per-rank table of a diagnosis. Every value from a node is escaped
    here (html.escape: the five characters Django's escape replaces); format_html per row cost
    most of the page at 4,096 ranks (its lazy wrappers, not the escaping)."""
    return mark_safe("\n".join(map(_rank_row, rows)))  # noqa: S308 (escaped cell by cell)


def _rank_row(row: RankRow) -> str:
    classes = f"rank-{row.status}" + (" suspect" if row.suspect else "")
    state = row.state or DASH
    if row.exit_code is not None:
        state = f"{state} (exit {row.exit_code})"
    step = DASH if row.last_step is None else row.last_step
    at = row.last_step_at.strftime("%H:%M:%S") if row.last_step_at else DASH
    return (
        f'<tr class="{escape(classes)}"><td>{row.rank}</td><td>{escape(row.node or DASH)}</td>'
        f"<td>{escape(row.status)}</td><td>{escape(state)}</td><td>{step}</td><td>{at}</td>"
        f"<td><code>{escape(row.frame or DASH)}</code></td></tr>"
    )
