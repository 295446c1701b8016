"""The analysis as map and reduce: each node parsed alone, stored as JSON, read back and merged,
gives the very diagnosis the one-pass `diagnose` gives, on every corpus case and lab sample.

Each node is mapped as a worker maps it when its node arrives: knowing only the host names of
the nodes that came before it (here, in reverse order), so the merge has to tell which parses
no longer hold. `collectors.bundles` imports Django settings: this file runs under
pytest-django; it uses no database.
"""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from analysis import codec, diagnose
from analysis.diagnosis import diagnose_parses
from analysis.evidence import NodeEvidence, SnapshotEvidence
from analysis.nodemap import NodeParse, from_json, map_node, to_json
from analysis.schedulers.attach import scheduler_log, scheduler_ranks
from analysis.signals.place import host_map
from collectors.bundles import read_bundle
from tests.analysis.sample_evidence import load_snapshot, split_nodes

CORPUS = Path(__file__).parent / "corpus"
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())
SAMPLES = ["outside", "crash", "init", "mismatch", "tp-mismatch", "tp-rank-stall"]
SAMPLES += ["healthy", "straggler"]


def _map(
    evidence: SnapshotEvidence,
    index: int,
    known: list[NodeEvidence],
    rank_pids=None,
    step_summaries=True,
):
    node = evidence.nodes[index]
    return map_node(
        node,
        hosts=host_map((n.node, n.hostname) for n in known),
        snapshot_collected_at=evidence.collected_at,
        assigned=scheduler_ranks(evidence.scheduler, node.node, node.hostname),
        scheduler_log=scheduler_log(evidence.scheduler, node.node, node.hostname),
        rank_pids=rank_pids,
        step_summaries=step_summaries,
    )


def _map_reduce(
    evidence: SnapshotEvidence, previous: SnapshotEvidence | None = None
) -> tuple[dict, int]:
    """The diagnosis from stored per-node parses, and how many nodes the merge parsed again."""
    stored: list[str] = [""] * len(evidence.nodes)
    arrived: list[NodeEvidence] = []
    for index in reversed(range(len(evidence.nodes))):  # the last node first
        arrived.append(evidence.nodes[index])
        stored[index] = json.dumps(to_json(_map(evidence, index, arrived)))
    parses = [from_json(json.loads(text)) for text in stored]
    again = []

    def reparse(index: int, rank_pids, step_summaries=True):
        again.append(index)
        return _map(evidence, index, evidence.nodes, rank_pids, step_summaries)

    head = dataclasses.replace(evidence, nodes=[])
    return diagnose_parses(head, parses, reparse, previous).to_json(), len(again)


def _corpus(case: Path) -> SnapshotEvidence:
    return read_bundle(case)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_case_merged_equals_one_pass(case: Path):
    evidence = _corpus(case)
    merged, _ = _map_reduce(evidence)
    assert merged == diagnose(evidence).to_json()


def _lab_cases() -> list:
    """Each captured scenario as one node (healthy and straggler: the second look, compared
    with the first), and spread over 2 and 4 nodes where every rank has its process."""
    cases = [pytest.param(s, None, id=f"{s}-one-node") for s in SAMPLES]
    cases += [
        pytest.param(s, n, id=f"{s}-{n}-per-node")
        for s in ("outside", "mismatch", "tp-mismatch", "tp-rank-stall", "healthy", "straggler")
        for n in (2, 1)
    ]
    return cases


def _lab(scenario: str) -> tuple[SnapshotEvidence, SnapshotEvidence | None]:
    if scenario in ("healthy", "straggler"):
        return load_snapshot(scenario, "snap1"), load_snapshot(scenario, "snap0")
    return load_snapshot(scenario), None


@pytest.mark.parametrize(("scenario", "per_node"), _lab_cases())
def test_lab_sample_merged_equals_one_pass(scenario: str, per_node: int | None):
    evidence, previous = _lab(scenario)
    if per_node:
        evidence = split_nodes(evidence, ranks_per_node=per_node)
        previous = split_nodes(previous, ranks_per_node=per_node) if previous else None
    merged, _ = _map_reduce(evidence, previous)
    one_pass = diagnose(evidence, previous=previous).to_json()
    assert merged == one_pass
    assert merged["suspect_ranks"] == one_pass["suspect_ranks"]


def test_multi_node_sample_uses_the_stored_parses():
    """The merge reads the stored parses, it does not quietly parse every node again: with the
    lab's lines (no other node's host named) no node needs a second parse."""
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=1)
    assert len(evidence.nodes) == 4
    merged, again = _map_reduce(evidence)
    assert again == 0
    assert merged["suspect_ranks"] == diagnose(evidence).to_json()["suspect_ranks"] == [3]


def test_a_rank_another_node_holds_stays_the_first_nodes():
    """Two nodes whose processes both say RANK=0: the first node (in order) keeps it, the
    second's copy is named as a problem, as the one pass does (its logs never asked for that
    pid's rank, so their parse holds)."""
    evidence = split_nodes(load_snapshot("outside"), ranks_per_node=2)
    first, second = evidence.nodes
    pid = next(iter(first.environ))
    second.environ[pid + 1000] = first.environ[pid]
    merged, again = _map_reduce(evidence)
    assert again == 0
    assert merged == diagnose(evidence).to_json()
    assert any("also held by pid" in p["problem"] for p in merged["parse_problems"])


def _stored(scenario: str = "outside") -> dict:
    evidence = load_snapshot(scenario)
    return json.loads(json.dumps(to_json(_map(evidence, 0, evidence.nodes))))


def test_stored_parse_round_trips_whole():
    stored = _stored()
    parse = from_json(stored)
    assert isinstance(parse, NodeParse)
    assert json.loads(json.dumps(to_json(parse))) == stored
    assert {p.rank for p in parse.processes} == {0, 1, 2, 3}


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.update(version=99),
        lambda d: d.update(parse="not a list"),
        lambda d: d["parse"].pop(),
        lambda d: d["parse"].__setitem__(0, 12),  # node: a number, not a name
        # Lists of records are stored as [row count, one column per field]:
        lambda d: d["parse"][11][2].__setitem__(0, "3"),  # a process's rank as text
        lambda d: d["parse"].__setitem__(4, "yesterday"),  # `when`, not a time
        lambda d: d["parse"][19].append([]),  # the dumps with one column too many
        lambda d: d["parse"][11].__setitem__(0, 5),  # more processes than the columns hold
        lambda d: d["parse"][11].__setitem__(0, 10**9),  # a row count past any node
        lambda d: d["parse"][11].__setitem__(1, {"same": 1}),  # the first column shared
        lambda d: d["parse"][11].__setitem__(2, {"same": 1, "and": 2}),  # not a column
        lambda d: d["parse"][11].__setitem__(2, {"same": "3"}),  # one rank for all, as text
        lambda d: d["parse"][11].__setitem__(2, {"other": 3}),  # a map, not a shared value
        lambda d: d["parse"][19].__setitem__(4, {"same": []}),  # records shared: never
        # A node's dumps' entries: its table of distinct ones, and each dump's by index:
        lambda d: d["parse"][27].__setitem__(0, 99),  # an index past the entries held
        lambda d: d["parse"][27].__setitem__(0, -1),  # an index below zero
        lambda d: d["parse"][27].__setitem__(0, "0"),  # an index as text
        lambda d: d["parse"][27].append(0),  # one index more than the dumps' times
        lambda d: d["parse"][27].__setitem__(1, d["parse"][27][0]),  # one entry twice
        lambda d: d["parse"][26].__setitem__(0, 99),  # more entries than the columns hold
        lambda d: d["parse"][19][5][0].__setitem__(0, "soon"),  # a time as text
        lambda d: d["parse"][19][5][0].pop(),  # a dump's times one short of its entries
        lambda d: d["parse"][19].__setitem__(4, [[1, 0, 0, 0], []]),  # entries in a dump
        # A column of lists of records is [each row's length, the records as columns]:
        lambda d: d["parse"][19].__setitem__(4, "6"),  # not [lengths, records]
        lambda d: d["parse"][18][5].append([]),  # the step summaries: not [lengths, records]
        lambda d: d["parse"][18][1].__setitem__(0, 2),  # the logs' facts: not one a log
        lambda d: d["parse"][18][1][3][0].__setitem__(0, 1),  # a log's step lines: one, not 5
        lambda d: d["parse"][18][1][3][0].__setitem__(0, False),  # a length, not a number
    ],
)
def test_damaged_stored_parse_is_refused(damage):
    """A stored parse is untrusted: every field is checked against its type, and anything
    else is refused whole (the merge then parses the node's evidence again)."""
    stored = _stored()
    damage(stored)
    with pytest.raises(codec.CodecError):
        from_json(stored)


@dataclasses.dataclass
class _Seen:
    name: str
    at: datetime | None


def test_a_column_of_one_time_is_stored_once():
    """A log's ranks often share one instant: stored once, read back as that time a row."""
    at = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    rows = [_Seen("a", at), _Seen("b", at)]
    stored = codec.encode(rows, list[_Seen])
    assert stored[2] == {"same": at.isoformat()}
    assert codec.decode(json.loads(json.dumps(stored)), list[_Seen]) == rows
    mixed = [_Seen("a", at), _Seen("b", None)]
    assert codec.decode(codec.encode(mixed, list[_Seen]), list[_Seen]) == mixed
    with pytest.raises(codec.CodecError):
        codec.decode([2, ["a", "b"], {"same": "not a time"}], list[_Seen])


@dataclasses.dataclass
class _Log:
    path: str
    seen: list[_Seen] = dataclasses.field(default_factory=list)
    ranks: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    later: tuple[_Seen, ...] = ()


def test_a_column_of_empty_lists_is_stored_as_empty():
    """Most of a log's parts are empty on every log of a node: such a column is stored as []
    and read back as a fresh empty value a row (records' lists are never shared)."""
    rows = [_Log("a"), _Log("b")]
    stored = codec.encode(rows, list[_Log])
    assert stored[2:] == [[], [], []]
    back = codec.decode(json.loads(json.dumps(stored)), list[_Log])
    assert back == rows
    assert back[0].seen is not back[1].seen and back[0].ranks is not back[1].ranks
    at = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    mixed = [_Log("a", [_Seen("x", at)], later=(_Seen("y", None),)), _Log("b", ranks={"h": [1]})]
    stored = codec.encode(mixed, list[_Log])
    assert [] not in stored[2:]
    assert codec.decode(json.loads(json.dumps(stored)), list[_Log]) == mixed
    for column, bad in [
        (2, [1]),  # not [lengths, records]
        (2, {"same": []}),  # records' lists shared: never
        (3, [[]]),  # one row's map for two rows
        (3, {"same": []}),  # a map of lists shared: never
        (4, [[0], []]),  # one length for two rows
    ]:
        damaged = codec.encode(rows, list[_Log])
        damaged[column] = bad
        with pytest.raises(codec.CodecError):
            codec.decode(damaged, list[_Log])


@dataclasses.dataclass
class _Entry:
    seq: int
    state: str | None
    time_ns: int


def test_a_repetitive_column_is_stored_as_its_text_and_checked():
    """A column of a few distinct scalars (a dump's sequence numbers, its entries' states) is
    most nodes' alike: stored as one JSON text, read once per text; a time in ns never."""
    rows = [_Entry(seq % 4, "completed" if seq % 4 else None, 10**18 + seq) for seq in range(16)]
    stored = json.loads(json.dumps(codec.encode(rows, list[_Entry])))
    assert type(stored[1]) is str and type(stored[2]) is str and type(stored[3]) is list
    assert codec.decode(stored, list[_Entry]) == rows
    assert codec.decode(json.loads(json.dumps(stored)), list[_Entry]) == rows  # from the cache
    for column, bad in [
        (1, json.dumps([0, 1] * 4)),  # 8 values for 16 rows
        (1, json.dumps(["0", "1"] * 8)),  # sequence numbers as text
        (1, json.dumps([[0]] * 16)),  # not scalars
        (1, json.dumps({"0": 1})),  # not a list
        (1, "[0, 1"),  # not JSON
        (1, "[" * 100 + "]" * 100),  # nested
        (2, json.dumps([1.5] * 16)),  # a number where a state is
        (2, " " * (codec.MAX_PLAIN_TEXT + 1)),  # past the bound
    ]:
        damaged = list(stored)
        damaged[column] = bad
        with pytest.raises(codec.CodecError):
            codec.decode(damaged, list[_Entry])


def test_the_column_texts_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(codec, "_COLUMNS_CHARS", 2_000)
    for start in range(0, 2_000, 2):
        rows = [_Entry(start + (i % 2), None, 0) for i in range(8)]
        assert codec.decode(codec.encode(rows, list[_Entry]), list[_Entry]) == rows
        assert codec._columns_chars <= codec._COLUMNS_CHARS
    assert sum(map(len, codec._COLUMNS)) == codec._columns_chars


@dataclasses.dataclass
class _Groups:
    path: str
    members: dict[str, tuple[int, ...]]


def test_a_column_of_one_groups_members_is_stored_once():
    """A node's dumps list the same groups (the default one: the whole world): stored once,
    read back as one map for every dump; a shared value of another shape is refused."""
    world = {"0": tuple(range(32_000)), "1": (0, 1)}
    rows = [_Groups("trace_rank_0", world), _Groups("trace_rank_1", dict(world))]
    stored = codec.encode(rows, list[_Groups])
    assert stored[2] == {"same": [["0", "0-31999"], ["1", "0-1"]]}
    back = codec.decode(json.loads(json.dumps(stored)), list[_Groups])
    assert back == rows
    other = [_Groups("a", world), _Groups("b", {"0": (0, 1)})]
    assert codec.encode(other, list[_Groups])[2] != {"same": [["0", "0-31999"]]}
    assert codec.decode(codec.encode(other, list[_Groups]), list[_Groups]) == other
    for bad in [{"same": [["0", "x"]]}, {"same": [["0"]]}, {"same": "0-3"}, {"same": [[0, "0"]]}]:
        with pytest.raises(codec.CodecError):
            codec.decode([2, ["a", "b"], bad], list[_Groups])


def test_untyped_fields_hold_plain_json_only():
    deep: list = []
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(codec.CodecError):
        codec.decode(json.dumps(deep), tuple)
    with pytest.raises(codec.CodecError):
        codec.decode({"a": 1}, dict)  # the JSON text of a value, not the value
    with pytest.raises(codec.CodecError):
        codec.decode("[" * 10 + "]" * 10 + " " * codec.MAX_PLAIN_TEXT, list)
    assert codec.decode("[[8,16],[8]]", tuple) == ((8, 16), (8,))


def test_a_tuple_of_ints_is_stored_as_runs():
    hint = tuple[int, ...]
    world = tuple(range(32_000))
    assert codec.encode(world, hint) == "0-31999"
    for value in [(), (5,), (0, 2, 3, 4, 9), (3, 1, 2), (4, 4), (-1, 2)]:
        assert codec.decode(json.loads(json.dumps(codec.encode(value, hint))), hint) == value
    for bad in ["1-", "3-1", "a", f"0-{codec.MAX_RUN_INTS}", ["1"], 7]:
        with pytest.raises(codec.CodecError):
            codec.decode(bad, hint)


def test_long_tuples_encode_the_same_through_the_cache_and_it_stays_bounded():
    hint = tuple[int, ...]
    rng = random.Random(7)
    for _ in range(300):
        start, gap, length = rng.randrange(-2, 40), rng.randrange(50, 400), rng.randrange(250, 5000)
        value = tuple(start + i + i // gap for i in range(length))
        assert codec.encode(value, hint) == codec.encode(tuple(list(value)), hint)
        assert codec.encode(value, hint) == codec._runs_text(value)
    assert sum(len(key) for key in codec._RUNS_TEXT) <= codec._RUNS_TEXT_INTS
    world = tuple(range(codec._RUNS_TEXT_INTS))  # fills the cache alone: the next one clears it
    assert codec.encode(world, hint) == f"0-{codec._RUNS_TEXT_INTS - 1}"
    assert codec.encode(tuple(range(1000)), hint) == "0-999"
    assert sum(len(key) for key in codec._RUNS_TEXT) <= codec._RUNS_TEXT_INTS
    shared = tuple(range(0, 3000, 3))  # the parser hands every dump one tuple: found by its id
    assert codec.encode(shared, hint) == codec._runs_text(shared)
    assert codec._RUNS_OF[id(shared)] == (shared, codec._runs_text(shared))
    assert codec.encode(shared, hint) == codec.encode(tuple(list(shared)), hint)
    assert sum(len(value) for value, _ in codec._RUNS_OF.values()) <= codec._RUNS_TEXT_INTS
