"""Flight-recorder entries alike across nodes are one object at read-back (analysis/fr_shared.py
`across_nodes`): nodes read back through the stored form share their alike entries and lists,
an entry that differs keeps its own, the reading says what it said, and the tables keep to
their cap whatever a node's parse holds."""

from __future__ import annotations

import json

import pytest

from analysis import alignment, codec, fr_shared
from analysis.parsers.flight_recorder import FrDump, FrEntry
from tests.analysis import test_alignment_fast_path as fast
from tests.analysis.test_fr_shared import FAULTS, _dumps, _nodes


@pytest.fixture(autouse=True)
def _empty_tables():
    fr_shared._ENTRIES.clear()
    fr_shared._LISTS.clear()
    yield
    fr_shared._ENTRIES.clear()
    fr_shared._LISTS.clear()


def _read_back(dumps: list[FrDump], per_node: int = 4) -> list[FrDump]:
    """The dumps node by node through the stored form (as JSON text, as the database holds
    it), read back in node order."""
    back = []
    for start in range(0, len(dumps), per_node):
        table, ids, kept = fr_shared.stored(dumps[start : start + per_node])
        stored = json.loads(
            json.dumps(codec.encode((table, kept), tuple[list[FrEntry], list[FrDump]]))
        )
        table, kept = codec.decode(stored, tuple[list[FrEntry], list[FrDump]])
        back += fr_shared.rebuilt(table, ids, kept)
    return back


def test_alike_entries_of_two_nodes_are_one_list_a_differing_one_its_own():
    dumps = _read_back(_nodes(_dumps(8, fast._size_at_3)))
    # rank 7 (node 1) sent another size at #3
    assert dumps[0].entries is dumps[4].entries  # two nodes' alike dumps: one list
    assert dumps[7].entries is not dumps[0].entries
    assert dumps[7].entries[2] != dumps[0].entries[2]
    assert dumps[7].entries[0] is dumps[0].entries[0]  # the alike ones still shared
    assert dumps[0].created_ns != dumps[4].created_ns  # each rank's times its own


def test_two_alike_entries_of_one_dump_stay_two_objects_across_nodes():
    def twice(rank, entries):
        entries.insert(4, dict(entries[3]))

    dumps = _read_back(_nodes(_dumps(8, twice)))
    assert dumps[0].entries is dumps[4].entries
    entries = dumps[4].entries
    assert entries[3] == entries[4] and entries[3] is not entries[4]


def test_shapes_that_differ_in_type_only_are_never_one():
    """1, 1.0 and true are equal in Python: the key reads the shapes by the codec's object of
    their stored text, which tells them apart."""

    raw = _nodes(_dumps(8, lambda rank, entries: None))
    for dump in raw[4:]:
        dump.entries = [e for e in dump.entries]
        dump.entries[0] = FrEntry(**{**_fields(dump.entries[0]), "in_shapes": ((1.0,),)})
    for dump in raw[:4]:
        dump.entries = [e for e in dump.entries]
        dump.entries[0] = FrEntry(**{**_fields(dump.entries[0]), "in_shapes": ((1,),)})
    for node in (raw[:4], raw[4:]):  # each node's dumps one list again
        for dump in node[1:]:
            dump.entries = node[0].entries
    dumps = _read_back(raw)
    assert dumps[0].entries[0] is not dumps[4].entries[0]
    assert type(dumps[4].entries[0].in_shapes[0][0]) is float
    assert dumps[0].entries[1] is dumps[4].entries[1]


def _fields(entry: FrEntry) -> dict:
    return {name: getattr(entry, name) for name in entry.__slots__}


@pytest.mark.parametrize("change", FAULTS, ids=[f.__name__ for f in FAULTS])
def test_the_reading_is_the_same_with_entries_shared_across_nodes(change):
    alone = alignment.read_dumps(_dumps(16, change), 16)
    shared = alignment.read_dumps(_read_back(_nodes(_dumps(16, change))), 16)
    assert shared.to_json() == alone.to_json()
    assert [(s.mismatch, s.created_ns) for s in shared.stops] == [
        (s.mismatch, s.created_ns) for s in alone.stops
    ]


def test_the_tables_keep_to_their_cap(monkeypatch):
    monkeypatch.setattr(fr_shared, "ENTRIES_CACHED", 10)
    monkeypatch.setattr(fr_shared, "LISTS_CACHED", 3)
    dumps = _nodes(_dumps(16, fast._drop_last))  # 6 entries a node
    for start in range(0, 16, 4):
        _read_back(dumps[start : start + 4])
        assert len(fr_shared._ENTRIES) <= 10 and len(fr_shared._LISTS) <= 3
    # a node with more distinct entries than the cap keeps its own and empties nothing more
    many = _dumps(1, lambda rank, entries: entries.extend(fast._entry(s) for s in range(7, 20)))
    back = _read_back(many)
    assert len(back[0].entries) == 19 and len(fr_shared._ENTRIES) == 0
    assert len(fr_shared._LISTS) <= 1
