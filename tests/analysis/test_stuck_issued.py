"""`rules.stuck._issued_at`: when the first rank issued a group's collective, read from each
dump's own times, also where a node's ranks share one list of entries."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from analysis.parsers.flight_recorder import FrDump, FrEntry
from analysis.rules.stuck import _issued_at

S = 1_000_000_000  # ns a second


def _entry(pg: str, seq: int) -> FrEntry:
    return FrEntry(pg, seq, "nccl:all_reduce", "[[4]]", "[[4]]", "scheduled", False, False)


def test_the_earliest_time_of_each_wanted_collective_over_every_dump_that_kept_times():
    shared = [_entry("0", 5), _entry("0", 6), _entry("1", 6)]  # one list for a node's ranks
    dumps = [
        FrDump("a", 0, entries=shared, created_ns=[10 * S, 30 * S, 50 * S]),
        FrDump("b", 1, entries=shared, created_ns=[9 * S, 0, 40 * S]),  # 0: no time kept
        FrDump("c", 2, entries=shared, created_ns=[8 * S]),  # out of step: not read
        FrDump("d", 3, entries=[_entry("0", 6)], created_ns=[20 * S]),  # a list of its own
        FrDump("e", 4, entries=[_entry("0", 6)], created_ns=[0]),
    ]
    facts = SimpleNamespace(snap=SimpleNamespace(dumps=dumps))
    issued = _issued_at(facts, {("0", 6), ("1", 6), ("2", 1)})
    assert issued == {
        ("0", 6): datetime.fromtimestamp(20, UTC),
        ("1", 6): datetime.fromtimestamp(40, UTC),
    }
