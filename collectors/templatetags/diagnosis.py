"""Large tables rendered in Python: 4,096 rank rows through the template engine take seconds."""

from django import template
from django.utils.html import format_html, format_html_join

register = template.Library()


@register.filter
def quotable(item: dict) -> bool:
    """Whether a verdict's evidence item is a line some stored artifact holds."""
    from collectors.evidence_viewer import is_linkable

    return is_linkable(item)


DASH = "—"


@register.simple_tag
def rank_rows(rows: list[dict]):
    """<tr> elements for the per-rank table of a diagnosis (escaped by format_html)."""
    return format_html_join("\n", "{}", ((_rank_row(row),) for row in rows))


def _rank_row(row: dict):
    classes = f"rank-{row.get('status', '')}" + (" suspect" if row.get("suspect") else "")
    state = row.get("state") or DASH
    if row.get("exit_code") is not None:
        state = f"{state} (exit {row['exit_code']})"
    step = row.get("last_step")
    return format_html(
        '<tr class="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
        "<td><code>{}</code></td></tr>",
        classes,
        row["rank"],
        row.get("node") or DASH,
        row.get("status") or DASH,
        state,
        DASH if step is None else step,
        (row.get("last_step_at") or "")[11:19] or DASH,
        row.get("frame") or DASH,
    )
