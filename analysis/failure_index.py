"""The signalled ranks' failures read once for every rule that looks for a kind or a peer.

At fleet scale `SignalFacts.signalled` holds 32,000 ranks and 64,000 failures (two watchdog
lines a rank); half a dozen rules each looked through all of them for a kind none of them
had (a stall report, an Xid, a RAS line, a named peer). Here the failures are laid out once,
in C, in reading order (rank order, then each rank's own order), and each question asked of
them is one pass in C, kept for the next rule that asks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, compress, repeat
from operator import attrgetter, is_not

from analysis.signals import Signal
from analysis.signals.summary import SignalFacts

_FAILURES, _KIND, _PEER = attrgetter("failures"), attrgetter("kind"), attrgetter("peer")


class FailureIndex:
    """(rank, failure) pairs of `signals.signalled` by kind and by a named peer, and the
    nodes' own signals (`by_node`, a few at most) the same way."""

    __slots__ = ("_kinds", "_memo", "_peers", "_ranks", "_signals", "node_signals")

    def __init__(self, signals: SignalFacts) -> None:
        found = list(map(_FAILURES, signals.signalled.values()))
        self._signals: list[Signal] = list(chain.from_iterable(found))
        lengths = map(len, found)
        self._ranks: list[int] = list(chain.from_iterable(map(repeat, signals.signalled, lengths)))
        self._kinds: list[str] = list(map(_KIND, self._signals))
        self._peers: list[int | None] = list(map(_PEER, self._signals))
        self._memo: dict[frozenset[str] | None, list[tuple[int, Signal]]] = {}
        # Every node's signals, in node order then each node's own order.
        self.node_signals: tuple[Signal, ...] = tuple(chain.from_iterable(signals.by_node.values()))

    def of_kinds(self, kinds: Iterable[str]) -> list[tuple[int, Signal]]:
        """(rank, failure) of any of these kinds, in reading order."""
        wanted = frozenset(kinds)
        pairs = self._memo.get(wanted)
        if pairs is None:
            chosen = map(wanted.__contains__, self._kinds)
            pairs = self._memo[wanted] = list(
                compress(zip(self._ranks, self._signals, strict=True), chosen)
            )
        return pairs

    def with_peer(self) -> list[tuple[int, Signal]]:
        """(rank, failure) of the failures that name a peer, in reading order."""
        pairs = self._memo.get(None)
        if pairs is None:
            named = map(is_not, self._peers, repeat(None))
            pairs = self._memo[None] = list(
                compress(zip(self._ranks, self._signals, strict=True), named)
            )
        return pairs

    def nodes_of_kinds(self, kinds: Iterable[str]) -> list[Signal]:
        """The nodes' signals of any of these kinds, in node order."""
        wanted = frozenset(kinds)
        return [s for s in self.node_signals if s.kind in wanted]
