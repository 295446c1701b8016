"""The per-rank table's rows, built in Python for speed: every value from a node escaped exactly
as Django's own format_html would, suspects and statuses marked."""

from datetime import UTC, datetime

from django.utils.html import format_html

from analysis.records import RankRow, RankStatus
from collectors.templatetags.diagnosis import DASH, rank_rows

HOSTILE = "<script>alert('x')</script> & \"q\""


def _as_format_html(row: RankRow) -> str:
    """The rows as the template tag built them before (format_html per row): the oracle."""
    state = row.state or DASH
    if row.exit_code is not None:
        state = f"{state} (exit {row.exit_code})"
    return format_html(
        '<tr class="{}"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
        "<td><code>{}</code></td></tr>",
        f"rank-{row.status}" + (" suspect" if row.suspect else ""),
        row.rank,
        row.node or DASH,
        row.status,
        state,
        DASH if row.last_step is None else row.last_step,
        row.last_step_at.strftime("%H:%M:%S") if row.last_step_at else DASH,
        row.frame or DASH,
    )


def test_rank_rows_escape_what_nodes_wrote_as_format_html_does():
    rows = [
        RankRow(0, RankStatus.IN_COLLECTIVE, node="gpu-0", state="S", last_step=12,
                last_step_at=datetime(2026, 11, 29, 9, 23, 42, tzinfo=UTC),
                frame="all_reduce (torch/distributed/distributed_c10d.py:3252)"),
        RankRow(1, RankStatus.EXITED, node=HOSTILE, state=HOSTILE, suspect=True, exit_code=-9,
                frame=HOSTILE),
        RankRow(2, RankStatus.UNOBSERVED),
    ]  # fmt: skip
    html = rank_rows(rows)
    assert html == "\n".join(_as_format_html(row) for row in rows)
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)" in html
    assert '<tr class="rank-exited suspect"><td>1</td>' in html
    assert (
        "<td>09:23:42</td>" in html and f'<tr class="rank-unobserved"><td>2</td><td>{DASH}' in html
    )
