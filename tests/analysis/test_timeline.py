"""The timeline figure as data: valid plotly, readable for 4 ranks and for 4,096."""

import plotly.graph_objects as go

from analysis import timeline_figure
from tests.analysis.sample_evidence import diagnosis_json, drop_rank_process, load_snapshot


def test_it_draws_one_point_per_rank_with_missing_and_suspect_marked():
    figure = timeline_figure(diagnosis_json(drop_rank_process(load_snapshot("outside"), 3)))
    go.Figure(figure)  # plotly validates every property
    by_name = {t["name"].split(" (")[0]: t for t in figure["data"]}
    assert by_name["waiting in a collective"]["y"] == [0, 1, 2]
    assert by_name["waiting in a collective"]["x"] == [5, 5, 5]
    assert by_name["missing"]["y"] == [3]
    assert by_name["suspect"]["y"] == [3]
    assert figure["data"][0]["type"] == "scatter"
    assert figure["layout"]["shapes"][0]["x0"] == 5
    assert figure["layout"]["annotations"][0]["text"] == "rank 3 (lab-node-0)"


def test_it_uses_webgl_for_thousands_of_ranks():
    rows = [
        {
            "rank": r,
            "node": f"n{r // 8}",
            "status": "in_collective" if r != 4000 else "missing",
            "suspect": r == 4000,
            "last_step": 100 if r != 4000 else None,
            "last_step_at": None,
            "frame": "all_reduce",
            "exit_code": None,
        }
        for r in range(4096)
    ]
    figure = timeline_figure({"classification": "A", "per_rank": rows, "last_completed_step": 100})
    go.Figure(figure)
    assert {t["type"] for t in figure["data"]} == {"scattergl"}
    assert sum(len(t["y"]) for t in figure["data"] if not t["name"].startswith("suspect")) == 4096
    assert figure["layout"]["height"] <= 900
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["rank 4000 (n500)"]
    # the missing rank (no step) sits at 99, left of everyone; one step of margin each side
    assert figure["layout"]["xaxis"]["range"] == [98, 101]
