"""The signals of a whole snapshot, summed per rank and per node for the engine to reason on.

Per rank (`RankSignals`): when its log last moved (the newest stamped line tied to it), its
latest progress, its first failure (the earliest stamped one, else the first one read) and
the ranks its lines name as the failing ones (it is then their victim). Failures tied to a
node and no rank are kept per node; NCCL RAS reports per node that gave one.

Everything is bounded: a rank keeps `MAX_FAILURES` failures (its first ones and its latest)
and `MAX_PEERS` peers, a node `MAX_NODE_SIGNALS` signals.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from analysis.parsers.ncclras import RasReport
from analysis.signals.model import FAILURE_KINDS, Signal

MAX_FAILURES = 16
MAX_PEERS = 64
MAX_NODE_SIGNALS = 64
MAX_PROGRESS = 12  # a rank's latest progress lines: enough for its pace between them


@dataclass(slots=True)  # not frozen: one a rank, and a frozen one sets each field by a call
class RankSignals:
    rank: int
    last_moved_at: datetime | None = None  # the newest time of any line tied to it
    last_progress: Signal | None = None  # its latest progress line (RankState.last_step
    # has the steps of the lab's own step lines, which the log reader takes on a fast path)
    first_failure: Signal | None = None  # its earliest failure: kind, time, line
    failures: tuple[Signal, ...] = ()  # its first and latest failures, in reading order
    peers: tuple[int, ...] = ()  # ranks its lines name as failing (it is their victim)
    # Beyond the above, for the engine: its latest progress lines in reading order, and its
    # latest checkpoint line (a save begun or under way).
    progress: tuple[Signal, ...] = ()
    checkpoint: Signal | None = None

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(s.kind for s in self.failures)


@dataclass(frozen=True)
class SignalFacts:
    by_rank: Mapping[int, RankSignals] = field(default_factory=dict)
    by_node: Mapping[str, tuple[Signal, ...]] = field(default_factory=dict)  # failures, no rank
    ras: tuple[tuple[str, RasReport], ...] = ()  # (node, report) for each ncclras output read
    ras_signals: tuple[Signal, ...] = ()  # `ras` / `ras_ok` signals of those reports
    # by_rank less the ranks only a step line moved (no failure, progress or checkpoint of
    # their own), in rank order: what a walk for failures reads (a few of 32,000 ranks).
    signalled: Mapping[int, RankSignals] = field(default_factory=dict)

    def silent_first(self) -> list[int]:
        """Ranks by when their logs last moved, the earliest first (only stamped ones)."""
        stamped = [(s.last_moved_at, r) for r, s in self.by_rank.items() if s.last_moved_at]
        return [rank for _, rank in sorted(stamped)]

    def victims_of(self, peer: int) -> list[int]:
        """The ranks whose lines name `peer` as the failing one."""
        return sorted(r for r, s in self.by_rank.items() if peer in s.peers)


# What a tally keeps of a signal with no time (a rank's NCCL configuration lines: none).
_TALLIED = FAILURE_KINDS | {"progress", "checkpoint"}


class _RankTally:
    # One a rank of the world (32,000): what most ranks never need is made when first needed.
    __slots__ = ("checkpoint", "failures", "moved", "peers", "progress", "recent")

    def __init__(self) -> None:
        self.moved: datetime | None = None
        self.progress: Signal | None = None
        self.recent: list[Signal] | None = None
        self.checkpoint: Signal | None = None
        # Its first MAX_FAILURES // 2 failures, then its latest as many (the oldest of
        # those dropped as one more comes).
        self.failures: list[Signal] | None = None
        self.peers: dict[int, None] | None = None

    def add(self, signal: Signal) -> None:
        if signal.at is not None and (self.moved is None or signal.at > self.moved):
            self.moved = signal.at
        if signal.kind == "progress":
            self._add_progress(signal)
            return
        if signal.kind == "checkpoint":
            if self.checkpoint is None or _later(signal, self.checkpoint):
                self.checkpoint = signal
            return
        if signal.kind not in FAILURE_KINDS:
            return
        if signal.peer is not None:
            if self.peers is None:
                self.peers = {}
            if len(self.peers) < MAX_PEERS:
                self.peers[signal.peer] = None
        failures = self.failures
        if failures is None:
            self.failures = [signal]
            return
        failures.append(signal)
        if len(failures) > MAX_FAILURES:
            del failures[MAX_FAILURES // 2]  # the oldest of the latest

    def _add_progress(self, signal: Signal) -> None:
        if self.progress is None or _later(signal, self.progress):
            self.progress = signal
        if self.recent is None:
            self.recent = []
        self.recent.append(signal)
        if len(self.recent) > MAX_PROGRESS:
            del self.recent[0]

    def done(self, rank: int) -> RankSignals:
        failures = tuple(self.failures) if self.failures else ()
        # The earliest stamped failure (the first of equals, as min gives), else the first
        # read: a loop over a few, 3x cheaper than a list and min() made for each rank.
        first = earliest = None
        for signal in failures:
            at = signal.at
            if at is not None and (earliest is None or at < earliest):
                first, earliest = signal, at
        if first is None and failures:
            first = failures[0]
        peers = self.peers
        return RankSignals(
            rank,
            self.moved,
            self.progress,
            first,
            failures,
            tuple(p for p in peers if p != rank) if peers else (),
            tuple(self.recent) if self.recent else (),
            self.checkpoint,
        )


class _ByRank(Mapping[int, RankSignals]):
    """SignalFacts.by_rank: the ranks with signals of their own, and the ranks only a step
    line moved, whose RankSignals (that time alone) is made when asked: most of a big
    job's ranks, and seldom asked."""

    __slots__ = ("_moved", "_order", "_signalled")

    def __init__(self, signalled: dict[int, RankSignals], moved: dict[int, datetime]) -> None:
        self._signalled, self._moved = signalled, moved
        self._order = sorted(moved.keys() | signalled.keys())

    def __getitem__(self, rank: int) -> RankSignals:
        found = self._signalled.get(rank)
        if found is not None:
            return found
        return RankSignals(rank, self._moved[rank])  # KeyError: not a rank of the snapshot's

    def get(self, rank: int, default: RankSignals | None = None) -> RankSignals | None:
        # Mapping.get goes through __getitem__ and a KeyError: a rule asks of every rank.
        found = self._signalled.get(rank)
        if found is not None:
            return found
        at = self._moved.get(rank)
        return RankSignals(rank, at) if at is not None or rank in self._moved else default

    def __contains__(self, rank: object) -> bool:
        return rank in self._signalled or rank in self._moved

    def __iter__(self) -> Iterator[int]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def _later(signal: Signal, than: Signal) -> bool:
    if signal.at is not None and than.at is not None:
        return signal.at >= than.at
    if signal.step is not None and than.step is not None:
        return signal.step >= than.step
    return True  # read later


def _moved(steps: Iterable[tuple[int, datetime]], world: int | None) -> dict[int, datetime]:
    """rank -> its latest step time, ranks past `world` ignored."""
    steps = list(steps)
    moved = dict(steps)  # in C: each rank once (a merge's rank states), all in the world
    if len(moved) == len(steps) and (
        world is None or not moved or 0 <= min(moved) <= max(moved) < world
    ):
        return moved
    moved = {}
    for rank, at in steps:
        if world is None or 0 <= rank < world:
            seen = moved.get(rank)
            if seen is None or at > seen:
                moved[rank] = at
    return moved


@dataclass(frozen=True)
class SignalPart:
    """A run of a snapshot's signals summed alone (`signal_part`): a node's logs' signals, made
    in its join from the node alone, so the merge adds each rank's tally instead of walking the
    signals. Never changed by a merge (the join serves every merge of the parse)."""

    signals: tuple[Signal, ...] = ()  # in reading order: for a rank another part names too
    by_rank: Mapping[int, RankSignals] = field(default_factory=dict)  # no step line's time
    # failures tied to a node and no rank, by node: its first MAX_NODE_SIGNALS, in order
    node_failures: Mapping[str, tuple[Signal, ...]] = field(default_factory=dict)


def signal_part(signals: Iterable[Signal]) -> SignalPart:
    """The signals' tally per rank (every rank, whatever the world) and their nodes' failures."""
    signals = tuple(signals)
    ranks = _tallies(signals, None)
    nodes: dict[str, list[Signal]] = {}
    for signal in signals:
        if signal.rank is None and signal.node and signal.kind in FAILURE_KINDS:
            kept = nodes.setdefault(signal.node, [])
            if len(kept) < MAX_NODE_SIGNALS:
                kept.append(signal)
    return SignalPart(
        signals,
        {rank: tally.done(rank) for rank, tally in ranks.items()},
        {node: tuple(kept) for node, kept in nodes.items()},
    )


def _tallies(signals: Iterable[Signal], ranks: set[int] | None) -> dict[int, _RankTally]:
    """A tally for each rank the signals name (only `ranks`, when given), in reading order."""
    tallies: dict[int, _RankTally] = {}
    tallied = _TALLIED
    for signal in signals:
        rank = signal.rank
        if rank is None or (ranks is not None and rank not in ranks):
            continue
        tally = tallies.get(rank)
        if tally is None:
            tally = tallies[rank] = _RankTally()
        if signal.at is not None or signal.kind in tallied:  # else it only names the rank
            tally.add(signal)
    return tallies


def summarise(
    signals: Iterable[Signal],
    ras: Iterable[tuple[str, RasReport]] = (),
    ras_signals: Iterable[Signal] = (),
    world: int | None = None,
    steps: Iterable[tuple[int, datetime]] = (),
) -> SignalFacts:
    """Sum every signal of a snapshot per rank (ranks past `world` ignored) and per node.
    `steps` are (rank, time) of step lines the log reader's fast path took without the line
    reader (the lab's own step line): they move a rank's log too."""
    return summarise_parts([signal_part(signals)], ras, ras_signals, world, steps)


def summarise_parts(
    parts: list[SignalPart],
    ras: Iterable[tuple[str, RasReport]] = (),
    ras_signals: Iterable[Signal] = (),
    world: int | None = None,
    steps: Iterable[tuple[int, datetime]] = (),
) -> SignalFacts:
    """`summarise` of the parts' signals read one part after the other: each rank's tally as
    its one part made it, a rank two parts name tallied again over their signals in order."""
    moved = _moved(steps, world)  # most ranks of a big job only moved: no tally for them
    found: dict[int, RankSignals] = {}
    again: set[int] = set()
    for part in parts:
        if found.keys().isdisjoint(part.by_rank):  # in C: a node's ranks are its own
            found.update(part.by_rank)
        else:
            again.update(found.keys() & part.by_rank.keys())
            found.update((r, s) for r, s in part.by_rank.items() if r not in found)
    if again:
        _tally_again(parts, again, found)
    if world is not None and found and not 0 <= min(found) <= max(found) < world:
        found = {rank: s for rank, s in found.items() if 0 <= rank < world}
    signalled: dict[int, RankSignals] = {}
    for rank in sorted(found):
        summed, at = found[rank], moved.get(rank)
        if at is not None and (summed.last_moved_at is None or at >= summed.last_moved_at):
            # a step line's time first, as if read before the signals
            summed = RankSignals(
                rank, at, summed.last_progress, summed.first_failure, summed.failures,
                summed.peers, summed.progress, summed.checkpoint,
            )  # fmt: skip
        signalled[rank] = summed
    return SignalFacts(
        by_rank=_ByRank(signalled, moved),
        by_node=_by_node(parts),
        ras=tuple(ras),
        ras_signals=tuple(ras_signals),
        signalled=signalled,
    )


def _tally_again(parts: list[SignalPart], ranks: set[int], found: dict[int, RankSignals]) -> None:
    """The ranks several parts name, each tallied over every part's signals in order."""
    read = [s for part in parts if not ranks.isdisjoint(part.by_rank) for s in part.signals]
    for rank, tally in _tallies(read, ranks).items():
        found[rank] = tally.done(rank)


def _by_node(parts: list[SignalPart]) -> dict[str, tuple[Signal, ...]]:
    nodes: dict[str, tuple[Signal, ...]] = {}
    for part in parts:
        for node, found in part.node_failures.items():
            kept = nodes.get(node)
            if kept is None:
                nodes[node] = found
            elif len(kept) < MAX_NODE_SIGNALS:
                nodes[node] = (*kept, *found)[:MAX_NODE_SIGNALS]
    return dict(sorted(nodes.items()))
