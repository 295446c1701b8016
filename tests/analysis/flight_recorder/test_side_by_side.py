"""hangdesk's flight-recorder reading against PyTorch's own analyzer, scenario by scenario.

Every scenario of PyTorch's analyzer tests, the cases issue 17 adds and real gloo dumps from the
lab (scenarios.py) are written as dumps in torch 2.13's format; hangdesk must give the answer
the evidence supports on every one. Both tools' answers are recorded in docs/accuracy.md; the
last test checks that the table there is what both answer today (PyTorch's analyzer is the one
in the venv, torch 2.13).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.flight_recorder import side_by_side
from tests.analysis.flight_recorder.scenarios import all_scenarios

SCENARIOS = all_scenarios()
ACCURACY = Path(__file__).resolve().parents[3] / "docs" / "accuracy.md"


def test_every_pytorch_scenario_and_the_issues_cases_are_here():
    sources = [s.source for s in SCENARIOS]
    # 10 pairs of test_match_one_event, 27 collectives of test_all_events, 5 backends, the 6
    # cases of testBuildDB.
    assert sources.count("pytorch") == 48
    assert sources.count("issue") >= 20
    assert sources.count("lab") >= 9
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_hangdesk_reads_it_as_the_evidence_says(scenario, tmp_path):
    directory = side_by_side.stage(scenario, tmp_path)
    answer = side_by_side.hangdesk(directory, scenario.world)
    assert side_by_side.right(scenario.expect, answer), (
        f"{scenario.name}: expected {scenario.expect.text()}, hangdesk says {answer.text()}"
    )


def test_the_side_by_side_table_in_docs_is_what_both_tools_answer_today():
    pytest.importorskip("torch.distributed.flight_recorder", reason="needs torch 2.13 (the venv)")
    rows = side_by_side.run(SCENARIOS)
    assert all(row.hangdesk_right for row in rows)
    table = side_by_side.markdown(rows)
    text = ACCURACY.read_text()
    assert side_by_side.BEGIN in text and side_by_side.END in text
    shown = text[
        text.index(side_by_side.BEGIN) : text.index(side_by_side.END) + len(side_by_side.END)
    ]
    assert shown == table, (
        "docs/accuracy.md's side-by-side table is stale: regenerate it with "
        "`.venv/bin/python -m tests.analysis.flight_recorder.side_by_side`"
    )
