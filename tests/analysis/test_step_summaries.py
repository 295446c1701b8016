"""The map summarizes a node's step lines per rank (`ranklogs.summarize_steps`); the merge
applies the summaries instead of the lines. Both must leave every rank as the lines do, and a
rank an earlier node's step lines already moved gets its node parsed again, lines kept.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta

from analysis import diagnose, snapshot_parse
from analysis.nodemap import map_node
from analysis.parsers.logs import LogFacts, StepRecord
from analysis.ranklogs import _apply_steps, apply_step_summaries, summarize_steps
from tests.analysis.sample_evidence import load_snapshot, split_nodes
from tests.analysis.test_map_reduce import _map_reduce

START = datetime(2026, 11, 29, 9, 0, 0)


def _random_logs(rng: random.Random) -> list[LogFacts]:
    """A node's logs whose step lines name their rank: steps that go on, repeat, go back (a
    restart), lines without a time or a step time, ranks interleaved and spread over logs."""
    logs = []
    for index in range(rng.randint(1, 4)):
        log = LogFacts(path=f"/logs/{index}.log", file_rank=None)
        for _ in range(rng.randint(0, 25)):
            step = rng.choice([rng.randint(0, 12), rng.randint(0, 3)])
            at = None if rng.random() < 0.2 else START + timedelta(seconds=rng.randint(0, 90))
            took = None if rng.random() < 0.4 else rng.choice([0.5, 0.25, -1.0, 0.0, 2.0])
            rank = rng.randint(0, 3)
            log.steps.append(StepRecord(rank, None, step, at, took, None, ""))
        logs.append(log)
    return logs


def _states(ranks: dict) -> list:
    return [(rank, dataclasses.astuple(state)) for rank, state in ranks.items()]


def test_summaries_leave_each_rank_as_the_lines_do():
    for seed in range(2000):
        _check_one_node(random.Random(seed))


def _check_one_node(rng: random.Random) -> None:
    logs = _random_logs(rng)
    by_lines: dict = {}
    problems: list = []
    for log in logs:
        _apply_steps("n", log, lambda rank, local: rank, by_lines, lambda *a: problems.append(a))
    summaries = summarize_steps(logs)
    assert summaries is not None and len(summaries) == len(logs)
    by_summaries: dict = {}
    for found in summaries:
        apply_step_summaries("n", found, by_summaries)
    assert _states(by_summaries) == _states(by_lines)  # the same ranks, made in one order
    assert problems == []


def test_a_line_naming_only_a_local_rank_keeps_the_lines():
    log = LogFacts(path="/logs/x.log", file_rank=None)
    log.steps.append(StepRecord(None, 3, 7, START, 0.5, None, ""))
    assert summarize_steps([log]) is None


def test_a_rank_two_nodes_log_steps_for_is_parsed_again_lines_kept(monkeypatch):
    """rank 3's log is also on node 0 (a shared directory): node 3's summaries would start
    rank 3 fresh, so the merge parses node 3 again with its step lines, and the diagnosis is
    the one the lines alone give."""
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=1)
    source = evidence.nodes[3].logs["/var/log/train/rank3.log"]
    later = source.replace("09:23:2", "09:24:2").replace("step=", "step=1")
    evidence.nodes[0].logs["/shared/rank3.log"] = later
    merged, again = _map_reduce(evidence)
    assert again == 1
    one_pass = diagnose(evidence).to_json()
    assert merged == one_pass

    def lines_only(*args, **kwargs):
        kwargs["step_summaries"] = False
        return map_node(*args, **kwargs)

    monkeypatch.setattr(snapshot_parse, "map_node", lines_only)
    assert diagnose(evidence).to_json() == one_pass
    row = next(r for r in one_pass["per_rank"] if r["rank"] == 3)
    assert row["last_step"] == 15  # node 0's later lines (steps 11-15), not node 3's
