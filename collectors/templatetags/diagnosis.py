"""Large tables rendered in Python: 4,096 rank rows through the template engine take seconds."""

from django import template
from django.utils.html import format_html, format_html_join

from analysis.records import RankRow
from analysis.verdict import Evidence

register = template.Library()


@register.filter
def quotable(item: Evidence) -> bool:
    """Whether a verdict's evidence item is a line some stored artifact holds."""
    from collectors.evidence_viewer import is_linkable

    return is_linkable(item)


DASH = "—"


@register.simple_tag
def rank_rows(rows: list[RankRow]):
    """<tr> elements for the per-rank table of a diagnosis (escaped by format_html)."""
    return format_html_join("\n", "{}", ((_rank_row(row),) for row in rows))


def _rank_row(row: RankRow):
    classes = f"rank-{row.status}" + (" suspect" if row.suspect else "")
    state = row.state or DASH
    if row.exit_code is not None:
        state = f"{state} (exit {row.exit_code})"
    return format_html(
        '<tr class="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
        "<td><code>{}</code></td></tr>",
        classes,
        row.rank,
        row.node or DASH,
        row.status,
        state,
        DASH if row.last_step is None else row.last_step,
        row.last_step_at.strftime("%H:%M:%S") if row.last_step_at else DASH,
        row.frame or DASH,
    )
