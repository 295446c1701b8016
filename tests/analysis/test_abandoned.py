"""A diagnosis its caller no longer wants stops at its next question (`keep_going`): during
the merge every KEEP_GOING_EVERY nodes, then before the facts and before the rules; asked
nothing, or told to go on, it is the diagnosis it always was."""

from __future__ import annotations

import dataclasses

import pytest

from analysis import Abandoned, diagnose, snapshot_parse
from analysis.diagnosis import diagnose_parses
from tests.analysis.sample_evidence import load_snapshot, split_nodes
from tests.analysis.test_map_reduce import _map


def _parses():
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=1)
    parses = [_map(evidence, i, evidence.nodes) for i in range(len(evidence.nodes))]

    def reparse(index, rank_pids, step_summaries=True):
        return _map(evidence, index, evidence.nodes, rank_pids, step_summaries)

    return evidence, dataclasses.replace(evidence, nodes=[]), parses, reparse


def test_told_to_go_on_it_asks_at_each_step_and_gives_the_same_diagnosis(monkeypatch):
    monkeypatch.setattr(snapshot_parse, "KEEP_GOING_EVERY", 1)
    evidence, head, parses, reparse = _parses()
    asked = []
    diagnosis = diagnose_parses(
        head, parses, reparse, keep_going=lambda: asked.append(True) or True
    )
    assert len(asked) == len(parses) + 2  # each node merged, then the facts, then the rules
    assert diagnosis.to_json() == diagnose(evidence).to_json()


@pytest.mark.parametrize(
    ("answers", "where"),
    [(2, "in the merge"), (4, "before the facts"), (5, "before the rules")],
)
def test_told_to_stop_it_stops_there_and_says_where(monkeypatch, answers, where):
    monkeypatch.setattr(snapshot_parse, "KEEP_GOING_EVERY", 1)
    _evidence, head, parses, reparse = _parses()
    assert len(parses) == 4
    asked = []

    def keep_going() -> bool:
        asked.append(True)
        return len(asked) <= answers

    with pytest.raises(Abandoned, match=where):
        diagnose_parses(head, parses, reparse, keep_going=keep_going)
    assert len(asked) == answers + 1  # nothing asked after the "no"


def test_the_merge_asks_once_a_slice_of_nodes(monkeypatch):
    monkeypatch.setattr(snapshot_parse, "KEEP_GOING_EVERY", 3)
    _evidence, head, parses, reparse = _parses()
    asked = []
    diagnose_parses(head, parses, reparse, keep_going=lambda: asked.append(True) or True)
    assert len(asked) == 2 + 2  # nodes 0 and 3 of 4, then the facts and the rules
