"""A node's parse in the merge's form (`nodemap.join_node`): the merge that extends a joined
node's lists, and adopts its rank states, builds the very snapshot the merge that places its
records one at a time builds, on every corpus case and lab sample; the join is made from the
node alone, and no merge changes it. `collectors.bundles` imports Django settings: this file
runs under pytest-django; it uses no database.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from analysis import nodemap
from analysis.diagnosis import diagnose_parses
from analysis.evidence import SnapshotEvidence
from analysis.rankmodel import NodeJoin
from analysis.snapshot_parse import parse_snapshot
from collectors.bundles import read_bundle
from tests.analysis.sample_evidence import load_snapshot, split_nodes

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())
LAB = [(s, None) for s in ("outside", "crash", "init", "mismatch", "tp-mismatch", "healthy")]
LAB += [(s, n) for s in ("outside", "mismatch", "tp-mismatch", "tp-rank-stall") for n in (2, 1)]


def _lab(scenario: str, per_node: int | None) -> SnapshotEvidence:
    evidence = load_snapshot(scenario)
    return split_nodes(evidence, ranks_per_node=per_node) if per_node else evidence


def _evidence(case: str) -> SnapshotEvidence:
    if case.startswith("lab:"):
        scenario, per_node = case[4:].rsplit(":", 1)
        return _lab(scenario, int(per_node) if per_node != "-" else None)
    return read_bundle(CORPUS / case)


ALL = [c.name for c in CASES] + [f"lab:{s}:{n or '-'}" for s, n in LAB]


def _unjoined(monkeypatch) -> None:
    """Every node merged the merge's own way, a log and a process at a time."""
    monkeypatch.setattr(nodemap, "join_node", lambda parse: NodeJoin(logs=None, processes=None))


def _snapshot(evidence: SnapshotEvidence):
    parsed = parse_snapshot(evidence, scheduler_lines=True)
    # Field by field, and the orders a dict's or set's equality does not see.
    orders = (list(parsed.ranks), list(parsed.env), list(parsed.mentioned))
    return parsed, orders


@pytest.mark.parametrize("case", ALL)
def test_a_joined_node_merges_as_each_record_placed(case: str, monkeypatch):
    evidence = _evidence(case)
    joined, joined_orders = _snapshot(evidence)
    with monkeypatch.context() as patch:
        _unjoined(patch)
        placed, placed_orders = _snapshot(evidence)
    assert joined == placed
    assert joined_orders == placed_orders


def test_the_corpus_holds_nodes_of_both_ways():
    """The test above compares something: some nodes join, some are the merge's to place (a
    line naming a local rank, a launcher's exits)."""
    logs, processes = set(), set()
    for case in ALL:
        evidence = _evidence(case)
        for node in evidence.nodes:
            parse = nodemap.map_node(node, hosts={}, snapshot_collected_at=evidence.collected_at)
            join = nodemap.join_node(parse)
            logs.add(join.logs is not None and bool(parse.logs))
            processes.add(join.processes is not None and bool(parse.processes))
    assert logs == {True, False}
    assert processes == {True, False}


def test_the_read_back_joins_each_parse_and_no_merge_changes_it():
    """A provisional verdict and the final one merge the same parses read back: the second
    merge gives what the first gave, and every join is as it was read (but the states made
    ahead, which the first merge takes: the second copies the join's)."""
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=2)
    stored = [
        json.dumps(nodemap.to_json(nodemap.map_node(n, hosts={}, snapshot_collected_at=None)))
        for n in evidence.nodes
    ]
    parses = [nodemap.from_json(json.loads(text)) for text in stored]
    assert all(p.join is not None and p.join.processes is not None for p in parses)
    assert all(p.join.processes.made_ahead and p.join.processes.stepped for p in parses)

    def as_read(join) -> str:
        """The join as every merge reads it: all but the states made ahead for the first."""
        kept = dataclasses.replace(join.processes, made_ahead=None)
        return json.dumps(
            dataclasses.asdict(dataclasses.replace(join, processes=kept)), default=str
        )

    before = [as_read(p.join) for p in parses]

    def reparse(index, rank_pids, step_summaries=True):
        raise AssertionError("every stored parse holds")

    head = dataclasses.replace(evidence, nodes=[])
    first = diagnose_parses(head, parses, reparse).to_json()
    assert all(p.join.processes.made_ahead is None for p in parses)  # the first merge's own
    second = diagnose_parses(head, parses, reparse).to_json()  # its copies of the states
    assert first == second
    assert [as_read(p.join) for p in parses] == before
    nodemap.make_ahead_again(parses)  # as the reader does after a first verdict
    assert all(p.join.processes.made_ahead and p.join.processes.stepped for p in parses)
    assert diagnose_parses(head, parses, reparse).to_json() == first
    assert [as_read(p.join) for p in parses] == before


def test_alike_environments_are_one_object_across_nodes():
    """Each node's parse is read back on its own; its join holds one object for each distinct
    environment of the whole snapshot (`envdiff` reads each object once)."""
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=1)
    first = evidence.nodes[0]  # its rank's environment apart, the others' alike
    first.environ = {
        pid: raw.replace(b"NCCL_DEBUG=INFO", b"NCCL_DEBUG=WARN")
        for pid, raw in first.environ.items()
    }
    stored = [
        json.dumps(nodemap.to_json(nodemap.map_node(n, hosts={}, snapshot_collected_at=None)))
        for n in evidence.nodes
    ]
    envs = [
        env
        for text in stored
        for env in nodemap.from_json(json.loads(text)).join.processes.env.values()
    ]
    assert len(envs) == 4
    distinct = {tuple(env.items()) for env in envs}
    assert len(distinct) == 2
    assert len({id(env) for env in envs}) == len(distinct)


def test_a_rank_states_copy_holds_every_field():
    """The merge copies a joined node's states (`RankState.copy`, field by field): a field
    added to RankState and left out of the copy would come back as missing."""
    from analysis.rankmodel import RankState

    values = {f.name: object() for f in dataclasses.fields(RankState)}
    made = RankState(**values)
    copied = made.copy()
    assert copied is not made and type(copied) is RankState
    assert all(getattr(copied, name) is value for name, value in values.items())
    assert copied == made and copied.__dict__ == made.__dict__


@pytest.mark.parametrize("per_node", [1, 2])
def test_a_node_parsed_again_after_its_states_were_taken_merges_as_with_copies(per_node):
    """The first merge takes the states made ahead with the node's step summaries on them; a
    node then parsed again (what its parse was told no longer holds) is merged as if its
    states had been copies of the join's: the same snapshot either way."""
    from analysis.snapshot_parse import merge_parses

    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=per_node)
    at = evidence.collected_at

    def reparse(index, rank_pids, step_summaries=True):
        node = evidence.nodes[index]
        return nodemap.map_node(
            node, hosts={}, snapshot_collected_at=at, rank_pids=rank_pids,
            step_summaries=step_summaries,
        )  # fmt: skip

    def merged(ahead: bool):
        parses = [reparse(i, None) for i in range(len(evidence.nodes))]
        for parse in parses:
            parse.asked_hosts = {"elsewhere": "a node of another snapshot"}
            processes = nodemap.joined(parse).processes
            assert processes.made_ahead and processes.stepped
            if not ahead:
                processes.made_ahead = None
        parsed = merge_parses(
            parses, expected_world_size=evidence.expected_world_size, collected_at=at,
            scheduler=None, scheduler_lines=False, flight_recorder=True, reparse=reparse,
        )  # fmt: skip
        return parsed, (list(parsed.ranks), list(parsed.env), list(parsed.mentioned))

    taken, copied = merged(True), merged(False)
    assert taken == copied
    assert any(state.last_step is not None for state in taken[0].ranks.values())
