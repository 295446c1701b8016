"""The timeline figure as data: valid plotly, readable for 4 ranks and for 4,096."""

import plotly.graph_objects as go

from analysis.diagnosis import Diagnosis
from analysis.evidence import not_gathered
from analysis.records import RankStatus
from readings.rank_timeline import STATUS_STYLE, rank_timeline_figure
from tests.analysis.sample_evidence import diagnosis_json, drop_rank_process, load_snapshot


def _figure(stored: dict) -> dict:
    """The chart of a diagnosis as the pages read it back from the database."""
    return rank_timeline_figure(Diagnosis.from_json(stored))


def test_it_draws_one_point_per_rank_with_missing_and_suspect_marked():
    figure = _figure(diagnosis_json(drop_rank_process(load_snapshot("outside"), 3)))
    go.Figure(figure)  # plotly validates every property
    by_name = {t["name"].split(" (")[0]: t for t in figure["data"]}
    assert by_name["waiting in a collective"]["y"] == [0, 1, 2]
    assert by_name["waiting in a collective"]["x"] == [5, 5, 5]
    assert by_name["missing"]["y"] == [3]
    assert by_name["suspect"]["y"] == [3]
    assert figure["data"][0]["type"] == "scatter"
    assert figure["layout"]["shapes"][0]["x0"] == 5
    label = figure["layout"]["annotations"][0]
    assert label["text"] == "rank 3 (lab-node-0)"
    # the label sits right of the ring, not on the marker
    assert label["xanchor"] == "left" and label["ax"] > 0 and label["standoff"] >= 10
    assert figure["layout"]["xaxis"]["range"] == [3, 7]


def _rows(count: int, odd: dict[int, str]) -> list[dict]:
    return [
        {
            "rank": r,
            "node": f"n{r // 8}",
            "status": odd.get(r, "in_collective"),
            "suspect": r in odd,
            "last_step": 100 if r not in odd else None,
            "last_step_at": None,
            "frame": "all_reduce",
            "exit_code": None,
        }
        for r in range(count)
    ]


def test_thousands_of_ranks_are_grouped_not_smeared():
    rows = _rows(4096, {4000: "missing", 17: "outside"})
    rows[17]["last_step"] = 99
    figure = _figure({"classification": "A", "per_rank": rows, "last_completed_step": 99})
    go.Figure(figure)
    (bars,) = figure["data"]
    assert bars["type"] == "bar" and bars["orientation"] == "h"
    # suspects' groups first, each a bar as long as its rank count; the pack last
    assert bars["y"] == [
        "step 99 · outside any collective",
        "no step · missing",
        "step 100 · waiting in a collective",
    ]
    assert bars["x"] == [1, 1, 4094]
    assert bars["text"][0] == "1 · ranks 17 · suspect 17 (n2)"
    assert bars["text"][1] == "1 · ranks 4000 · suspect 4000 (n500)"
    assert bars["text"][2].startswith("4094 · ranks 0-16, 18-3999, 4001-4095")
    # one rank stays visible on the log axis (its range starts below log10(1) = 0)
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert figure["layout"]["xaxis"]["range"][0] < 0
    assert bars["marker"]["line"]["color"][:2] == ["#D62728", "#D62728"]
    assert figure["layout"]["height"] <= 720


def test_four_ranks_stay_dots_and_sixty_five_become_groups():
    assert _figure({"per_rank": _rows(4, {3: "missing"})})["data"][0]["type"] == "scatter"
    assert _figure({"per_rank": _rows(65, {3: "missing"})})["data"][0]["type"] == "bar"


def test_many_distinct_groups_are_folded_into_one_bar():
    rows = _rows(300, {})
    for r in rows:
        r["last_step"] = r["rank"] // 10  # 30 groups of 10
    figure = _figure({"per_rank": rows})
    (bars,) = figure["data"]
    assert len(bars["y"]) == rank_groups_cap()
    assert bars["y"][-1] == "7 more groups"
    assert sum(bars["x"]) == 300


def rank_groups_cap() -> int:
    from readings.rank_timeline import MAX_GROUPS

    return MAX_GROUPS


def _unreachable_node() -> dict:
    """Two nodes, the second unreachable: its ranks are unobserved (nothing says anything of
    them), the first node's wait in the collective."""
    from analysis.evidence import NodeEvidence
    from tests.analysis.sample_evidence import split_nodes

    snapshot = split_nodes(load_snapshot("outside"))
    lost = snapshot.nodes[1]
    snapshot.nodes[1] = NodeEvidence(
        node=lost.node, status=not_gathered("unreachable: timed out after 10s")
    )
    return diagnosis_json(snapshot)


def test_unobserved_ranks_are_drawn_not_dropped():
    diagnosis = _unreachable_node()
    assert {r["status"] for r in diagnosis["per_rank"]} == {"in_collective", "unobserved"}
    figure = _figure(diagnosis)
    go.Figure(figure)
    drawn = [rank for trace in figure["data"] if trace["name"] != "suspect" for rank in trace["y"]]
    assert sorted(drawn) == [r["rank"] for r in diagnosis["per_rank"]], "every rank, once"
    by_name = {t["name"].split(" (")[0]: t for t in figure["data"]}
    assert by_name["nothing collected"]["y"] == [2, 3]


def test_every_rank_status_has_a_style_of_its_own():
    assert set(STATUS_STYLE) == set(RankStatus)
    # The grouped view orders its groups as the legend does.
    from analysis.rankview import STATUS_ORDER

    assert tuple(STATUS_STYLE) == STATUS_ORDER
    assert len({label for label, _, _ in STATUS_STYLE.values()}) == len(RankStatus)


def test_unobserved_ranks_have_their_own_bar_among_thousands():
    rows = _rows(4096, {})
    for row in rows[4000:]:
        row.update(status="unobserved", last_step=None)
    (bars,) = _figure({"per_rank": rows})["data"]
    assert "no step · nothing collected" in bars["y"] and sum(bars["x"]) == 4096
