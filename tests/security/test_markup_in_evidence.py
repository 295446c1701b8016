"""The rank chart rendered node and frame names as markup (plotly reads `<a href>`, `<b>` ...
in every label): a bundle folder name became a clickable link on the incident, print and
shared pages. Now every name from evidence is text in the figure."""

from __future__ import annotations

import plotly.graph_objects as go

from analysis.diagnosis import Diagnosis
from readings.rank_timeline import rank_timeline_figure
from tests.analysis.sample_evidence import diagnosis_json, drop_rank_process, load_snapshot

LINK = '<a href="https://evil.example/login">gpu-7</a>'
BOLD = "<b>all_reduce</b> & <br>more"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _hostile(rows: int) -> dict:
    stored = diagnosis_json(drop_rank_process(load_snapshot("outside"), 3))
    template = stored["per_rank"][0]
    stored["per_rank"] = [{**template, "rank": r, "node": LINK, "frame": BOLD} for r in range(rows)]
    stored["suspect_ranks"] = [0, 1]
    stored["world_size"] = rows
    return stored


def test_no_name_from_evidence_is_markup_in_either_form_of_the_chart():
    for rows in (4, 600):  # one dot per rank, and the grouped bars
        figure = rank_timeline_figure(Diagnosis.from_json(_hostile(rows)))
        go.Figure(figure)
        texts = list(_strings(figure))
        assert not [t for t in texts if "<a" in t or "<b>" in t], rows
        assert not [t for t in texts if "<br>more" in t]
        shown = "\n".join(texts)
        if rows == 4:  # the hover shows the names, as text
            assert "&lt;a href=" in shown and "&lt;b&gt;all_reduce&lt;/b&gt; &amp;" in shown
