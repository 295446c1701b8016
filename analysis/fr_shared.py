"""A node's flight-recorder entries alike across its dumps, held as one object, and stored once.

The ranks of a node issue the same collectives: their entries differ in their times only, and
the dumps keep those apart (`FrDump.created_ns`). So the map makes entries alike in every field
one object for the node's dumps (and dumps alike in every entry one list), and the stored
parse holds the node's distinct entries once, each dump naming its own by index. The reduce
then builds a few records a node instead of a few a rank, and the reading of the dumps
(`analysis.alignment`) reads a shared list once.

Within one dump, entries stay distinct objects even when alike: a dump's time of an entry is
found by the entry's identity (`fr_model.first_created`).
"""

from __future__ import annotations

from dataclasses import fields, replace
from operator import attrgetter

from analysis.codec import CodecError
from analysis.parsers.flight_recorder import FrDump, FrEntry

# Every field of an entry but its frames, compared by value; the frames (a list of maps) by
# the identity of their maps (the map keeps one copy of an equal frame for a node's dumps).
VALUE_FIELDS = tuple(f.name for f in fields(FrEntry) if f.name != "raw_frames")
_VALUES = attrgetter(*VALUE_FIELDS)


def _content(entry: FrEntry) -> tuple | object:
    """What makes two entries one: every field equal, the very same frames (equal frames that
    are not one object keep two entries apart: never one for two that differ)."""
    frames = entry.raw_frames
    key = (_VALUES(entry), id(frames[0]) if len(frames) == 1 else tuple(map(id, frames)))
    try:
        hash(key)
    except TypeError:  # a part no hash takes (not what the parser makes): the entry's own
        return object()
    return key


def share_entries(dumps: list[FrDump]) -> None:
    """Entries alike across the node's dumps made one object (the k-th alike entry of a dump
    is the k-th object), and dumps alike in all their entries one list. Nothing changes an
    entry or a dump's list after the map."""
    seen: dict[tuple | object, list[FrEntry]] = {}  # content -> its objects, by occurrence
    lists: dict[tuple[int, ...], list[FrEntry]] = {}
    for dump in dumps:
        occurrences: dict[tuple | object, int] = {}
        mine = []
        for entry in dump.entries:
            key = _content(entry)
            nth = occurrences.get(key, 0)
            occurrences[key] = nth + 1
            objects = seen.setdefault(key, [])
            if nth == len(objects):
                objects.append(entry)
            mine.append(objects[nth])
        dump.entries = lists.setdefault(tuple(map(id, mine)), mine)


def stored(dumps: list[FrDump]) -> tuple[list[FrEntry], list[int], list[FrDump]]:
    """The node's distinct entries, every dump's entries as indices into them (one list, in
    dump order: each dump's count is its count of times), and the dumps without their
    entries: the stored form."""
    table: list[FrEntry] = []
    index: dict[int, int] = {}  # id(entry) -> its place in the table
    ids = []
    for dump in dumps:
        if len(dump.created_ns) != len(dump.entries):
            raise ValueError(f"{dump.path}: its times are out of step with its entries")
        for entry in dump.entries:
            at = index.get(id(entry))
            if at is None:
                at = index[id(entry)] = len(table)
                table.append(entry)
            ids.append(at)
    return table, ids, [replace(dump, entries=[]) for dump in dumps]


def rebuilt(table: list[FrEntry], ids: list[int], dumps: list[FrDump]) -> list[FrDump]:
    """The dumps with their entries again, from the stored form (checked: `CodecError`)."""
    if not dumps and not ids and not table:
        return dumps
    size = len(table)
    if ids and not (min(ids) >= 0 and max(ids) < size):
        raise CodecError("NodeParse.fr_entry_ids: an index outside the entries")
    if len(set(ids)) != size:
        raise CodecError("NodeParse.fr_entries: an entry no dump holds")
    table = across_nodes(table)
    lists: dict[tuple[int, ...], list[FrEntry]] = {}
    start = 0
    for dump in dumps:
        if dump.entries:
            raise CodecError("FrDump.entries: stored in the node's table, not in the dump")
        end = start + len(dump.created_ns)  # one time an entry
        key = tuple(ids[start:end])
        entries = lists.get(key)
        if entries is None:
            if len(set(key)) != len(key):
                raise CodecError("NodeParse.fr_entry_ids: an entry twice in one dump")
            entries = lists[key] = _shared_list(list(map(table.__getitem__, key)))
        dump.entries = entries
        start = end
    if start != len(ids):
        raise CodecError("NodeParse.fr_entry_ids: one index a time of the dumps expected")
    return dumps


# --- alike across nodes, at read-back ---------------------------------------------------------

# One object for entries (and entry lists) alike across the nodes read back: a job's 4,000
# nodes issue the same collectives, so the reading (`analysis.alignment`) reads a few lists,
# not one a node, and compares them by identity first. Bounded (a node's parse is untrusted:
# one with many distinct entries empties the tables, it never grows them past their cap);
# nothing changes an entry or a dump's list after the map.
_ENTRIES: dict[tuple, FrEntry] = {}
_LISTS: dict[tuple[int, ...], list[FrEntry]] = {}
ENTRIES_CACHED = 16_384
LISTS_CACHED = 4_096
# The typed fields by value (the codec checked their exact types); the untyped ones (shapes,
# frames) by identity: the codec gives one object for one stored text (`codec._cached_tuple`,
# `_cached_plain`), so 1, 1.0 and true are never one. The key's entry keeps those objects
# alive while the key is held, so an id in it is never another object's.
_TYPED = attrgetter(*(f for f in VALUE_FIELDS if f not in ("in_shapes", "out_shapes")))


def _across_key(entry: FrEntry) -> tuple:
    return (_TYPED(entry), id(entry.in_shapes), id(entry.out_shapes), id(entry.raw_frames))


def across_nodes(table: list[FrEntry]) -> list[FrEntry]:
    """The node's distinct entries as the objects of alike entries of nodes read before. A
    node's alike entries stay distinct objects (the k-th alike one is the k-th shared one):
    a dump's times are found by its entries' identity."""
    if len(_ENTRIES) + len(table) > ENTRIES_CACHED:
        _ENTRIES.clear()
        _LISTS.clear()
        if len(table) > ENTRIES_CACHED:
            return table  # more than the cap by itself: its own objects
    occurrences: dict[tuple, int] = {}
    shared = []
    for entry in table:
        key = _across_key(entry)
        nth = occurrences.get(key, 0)
        occurrences[key] = nth + 1
        shared.append(_ENTRIES.setdefault((key, nth), entry))
    return shared


def _shared_list(entries: list[FrEntry]) -> list[FrEntry]:
    key = tuple(map(id, entries))
    known = _LISTS.get(key)
    if known is None:
        if len(_LISTS) >= LISTS_CACHED:
            _LISTS.clear()
        known = _LISTS[key] = entries
    return known
