"""A node's flight-recorder entries alike but for their time are one object (analysis/fr_shared.py):
the reading of the dumps, their times and the stored form say exactly what they said with one
object an entry."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from analysis import alignment, fr_shared
from analysis.codec import CodecError
from analysis.evidence import NodeEvidence
from analysis.nodemap import map_node
from analysis.parsers.flight_recorder import FrEntry, parse_flight_recorder
from tests.analysis import test_alignment_fast_path as fast

FAULTS = [
    fast._drop_last,
    fast._size_at_3,
    fast._not_completed_at_4,
    fast._gap,
    fast._coalesced,
    fast._everyone_waiting,
    fast._p2p_on_one,
]


def _dumps(world: int, change) -> list:
    """One dump a rank, each rank's times its own (rank 5 issued everything first)."""
    raw = _raw_dumps(world, change)
    return [parse_flight_recorder(f"trace_rank_{r}", d) for r, d in enumerate(raw)]


def _raw_dumps(world: int, change) -> list[bytes]:
    dumps = []
    for rank in range(world):
        entries = [fast._entry(seq) for seq in range(1, 7)]
        entries[-1]["state"] = "scheduled"
        change(rank, entries)
        for entry in entries:
            entry["time_created_ns"] += -500 if rank == 5 else 10 * rank
        raw = {
            "rank": rank,
            "pg_config": {"0": {"desc": "default_pg", "ranks": str(list(range(world)))}},
            "entries": entries,
        }
        dumps.append(pickle.dumps(raw, protocol=2))
    return dumps


def _nodes(dumps: list, per_node: int = 4) -> list:
    """The dumps shared node by node, as each node's map shares them."""
    shared = copy.deepcopy(dumps)
    for start in range(0, len(shared), per_node):
        fr_shared.share_entries(shared[start : start + per_node])
    return shared


def test_entries_alike_are_one_object_their_times_each_ranks_own():
    dumps = _nodes(_dumps(8, fast._coalesced))
    first, second, other_node = dumps[0], dumps[1], dumps[4]
    assert first.entries is second.entries  # alike in every entry: one list
    assert first.entries is not other_node.entries  # never across nodes
    assert first.created_ns != second.created_ns
    assert first.created_ns == _dumps(8, fast._coalesced)[0].created_ns
    # rank 11 is absent here; #4's two ops are alike but for their sizes: two objects
    assert len({id(e) for e in first.entries}) == len(first.entries)


def test_two_alike_entries_of_one_dump_stay_two_objects():
    def twice(rank, entries):
        entries.insert(4, dict(entries[3]))  # #4 recorded twice, alike in every field

    dumps = _nodes(_dumps(4, twice))
    entries = dumps[0].entries
    assert entries[3] == entries[4] and entries[3] is not entries[4]
    assert dumps[1].entries[4] is entries[4]


@pytest.mark.parametrize("change", FAULTS, ids=[f.__name__ for f in FAULTS])
def test_the_reading_is_the_same_with_entries_shared(change):
    dumps = _dumps(16, change)
    alone, shared = alignment.read_dumps(dumps, 16), alignment.read_dumps(_nodes(dumps), 16)
    assert shared.to_json() == alone.to_json()
    assert [(s.mismatch, s.created_ns) for s in shared.stops] == [
        (s.mismatch, s.created_ns) for s in alone.stops
    ]
    assert any(s.created_ns is not None for s in alone.stops)


def test_the_stored_form_gives_back_the_dumps_their_times_and_their_sharing():
    dumps = _nodes(_dumps(4, fast._gap))
    table, ids, kept = fr_shared.stored(dumps)
    assert len(table) == 6  # rank 2 forgot #3: its other entries are the others' objects
    assert all(d.entries == [] for d in kept) and dumps[0].entries  # the map's parse unchanged
    back = fr_shared.rebuilt(table, ids, copy.deepcopy(kept))
    assert [d.entries for d in back] == [d.entries for d in dumps]
    assert [d.created_ns for d in back] == [d.created_ns for d in dumps]
    assert back[0].entries is back[1].entries and back[0].entries is not back[2].entries


@pytest.mark.parametrize(
    "damage",
    [
        lambda table, ids, dumps: ids.__setitem__(0, len(table)),  # past the table
        lambda table, ids, dumps: ids.__setitem__(0, -1),
        lambda table, ids, dumps: ids.pop(),  # one index short of the times
        lambda table, ids, dumps: ids.append(0),  # one index more
        lambda table, ids, dumps: ids.__setitem__(1, ids[0]),  # one entry twice in a dump
        lambda table, ids, dumps: table.append(table[0]),  # an entry no dump holds
        lambda table, ids, dumps: dumps[0].entries.append(table[0]),  # entries in a dump
        lambda table, ids, dumps: dumps[1].created_ns.pop(),  # times out of step
    ],
)
def test_a_damaged_stored_form_is_refused(damage):
    table, ids, kept = fr_shared.stored(_nodes(_dumps(4, fast._drop_last)))
    damage(table, ids, kept)
    with pytest.raises(CodecError):
        fr_shared.rebuilt(table, ids, kept)


def test_every_field_of_an_entry_is_in_its_key():
    """A field left out of the key would make two entries that differ in it one."""
    assert {*fr_shared.VALUE_FIELDS, "raw_frames"} == {f.name for f in dataclasses.fields(FrEntry)}
    entry = _dumps(1, fast._drop_last)[0].entries[0]
    for name in fr_shared.VALUE_FIELDS:  # each field apart: another value, another key
        other = dataclasses.replace(entry, **{name: _other(getattr(entry, name))})
        assert fr_shared._content(other) != fr_shared._content(entry), name
    unhashable = dataclasses.replace(entry, in_shapes=([1],))
    assert fr_shared._content(unhashable) != fr_shared._content(unhashable)  # its own


def _other(value):
    if type(value) is bool:
        return not value
    if type(value) is int:
        return value + 1
    if type(value) is str:
        return value + "x"
    return (*value, "x") if type(value) is tuple else ("x",)


def test_entries_of_equal_frames_are_one_across_a_nodes_dumps():
    def framed(rank, entries):
        for entry in entries:
            entry["frames"] = [{"filename": "train.py", "name": "step", "line": 9}]

    evidence = NodeEvidence(node="n", hostname="n")
    for rank, dump in enumerate(_raw_dumps(4, framed)):
        evidence.flight_recorder[f"trace_rank_{rank}"] = dump
    parse = map_node(evidence, hosts={})
    assert parse.dumps[0].entries is parse.dumps[3].entries
    assert parse.dumps[0].entries[0].frame == "step (train.py:9)"
