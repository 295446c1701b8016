"""`FailureIndex`: the signalled ranks' failures picked by kind and by peer answer as the walk
of `signalled` each rule made before (same pairs, same order)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from analysis.failure_index import FailureIndex
from analysis.signals.model import Signal
from analysis.signals.summary import summarise

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def _signals():
    lines = []
    for rank in (5, 0, 3, 1):  # read out of rank order
        for k, kind in enumerate(("timeout", "xid", "desync", "timeout", "exception")):
            if (rank + k) % 2 or kind == "timeout":
                peer = (rank + 1) % 6 if kind == "desync" else None
                at = T0 + timedelta(seconds=rank * 10 + k)
                lines.append(Signal(kind, rank, f"n{rank // 2}", f"{kind} {rank} {k}", peer, at=at))
    lines.append(Signal("desync", None, "n0", "a coordinator's stall report", peer=2))
    lines.append(Signal("ras", None, "n1", "RAS: rank 4 unreachable", peer=4))
    return summarise(lines, world=8)


def test_kinds_and_peers_as_the_walk_of_every_rank_gives_them():
    facts = _signals()
    index = FailureIndex(facts)
    walk = [(r, s) for r, found in facts.signalled.items() for s in found.failures]
    for kinds in (("timeout",), ("xid",), ("desync", "exception"), ("segfault",)):
        assert index.of_kinds(kinds) == [(r, s) for r, s in walk if s.kind in kinds]
    assert index.with_peer() == [(r, s) for r, s in walk if s.peer is not None]
    nodes = [s for found in facts.by_node.values() for s in found]
    assert index.node_signals == tuple(nodes)
    assert index.nodes_of_kinds(("ras",)) == [s for s in nodes if s.kind == "ras"]
    assert [r for r, _ in index.of_kinds(("timeout",))] == sorted(
        r for r, _ in index.of_kinds(("timeout",))
    )
    assert index.of_kinds(["xid"]) is index.of_kinds(("xid",))  # asked again: the same answer


def test_no_signal_no_pair():
    index = FailureIndex(summarise([], world=4))
    assert index.of_kinds(("timeout",)) == [] and index.with_peer() == [] and not index.node_signals
