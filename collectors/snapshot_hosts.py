"""How lines spell a snapshot's nodes (`analysis.signals.place.host_map`), as a worker maps
its nodes' evidence (`nodeparse.node_parses_store`): kept in the worker's process between its
batches of one snapshot instead of read whole for each batch.

Read whole, every node row of the snapshot with its stored host name, on each batch of 32
nodes, the map's side of a 4,000-node snapshot was quadratic (~0.3 ms a node at 4,000). Here
the process reads it whole once, is told the host names of the nodes it maps, and reads it
whole again only when a line asks for a name it does not know (a node whose parse another
process stored since, a push node new to the snapshot): at most once a batch, so never more
than before. An answer kept can be older than the database's only if two nodes spell a name
alike (one's host name, or its first label, another's): the merge checks every answer a
stored parse was given against the whole snapshot (`nodemap.still_holds`) and parses such a
node again, so a verdict never depends on this cache, only the tail's speed does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from .models import NodeCollection, Snapshot

# Snapshots a process keeps (a worker takes batches of several snapshots at once).
KEPT = 8


class Spellings:
    """`host_map` of a snapshot's (node, host name) pairs, kept up to date pair by pair: each
    spelling answers the first node in name order that spells so (host_map's setdefault over
    the rows in name order; the database's collation is C, Python's order)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self.hostnames: dict[str, str] = {}
        self.nodes: dict[str, str] = {}
        for node, hostname in pairs:
            self.learn(node, hostname)

    def learn(self, node: str, hostname: str) -> None:
        hostname = hostname or ""
        before = self.hostnames.get(node)
        self.hostnames[node] = hostname
        if before and before != hostname:  # a name it no longer has: made again
            self.__init__(list(self.hostnames.items()))
            return
        for name in (node, hostname):
            if name:
                for spelling in (name, name.split(".", 1)[0]):
                    known = self.nodes.get(spelling)
                    if known is None or node < known:
                        self.nodes[spelling] = node


def _read(snapshot_id: int) -> Spellings:
    rows = NodeCollection.objects.filter(snapshot_id=snapshot_id)
    return Spellings(
        (name, host or "") for name, host in rows.values_list("node_name", "parse_record__hostname")
    )


# By (snapshot id, its start): a database emptied and filled again under a long-lived process
# (tests, benches) reuses ids, never with the same start.
Key = tuple[int, object]
_KEPT: OrderedDict[Key, Spellings] = OrderedDict()


class SnapshotHosts(Mapping):
    """One batch's view: answers from the process's spellings, read whole again (once) on a
    name they do not know."""

    def __init__(self, key: Key, spellings: Spellings, batch: list[tuple[str, str]]) -> None:
        self.key, self.spellings, self.batch, self.reread = key, spellings, batch, False

    def learn(self, node: str, hostname: str) -> None:
        """One more node of the batch, about to be stored (its map comes next)."""
        self.batch.append((node, hostname))
        self.spellings.learn(node, hostname)

    def _again(self) -> None:
        self.spellings = _KEPT[self.key] = _read(self.key[0])
        for node, hostname in self.batch:  # about to be stored, not committed yet
            self.spellings.learn(node, hostname)
        self.reread = True

    def __getitem__(self, spelling: str) -> str:
        node = self.spellings.nodes.get(spelling)
        if node is None and not self.reread:
            self._again()
            node = self.spellings.nodes.get(spelling)
        if node is None:
            raise KeyError(spelling)
        return node

    def __iter__(self) -> Iterator[str]:
        if not self.reread:
            self._again()
        return iter(self.spellings.nodes)

    def __len__(self) -> int:
        if not self.reread:
            self._again()
        return len(self.spellings.nodes)


def of(snapshot: Snapshot, batch: Iterable[tuple[str, str]]) -> SnapshotHosts:
    """The snapshot's spellings for a batch of its nodes, (node, host name) each, as they are
    about to be stored."""
    key, batch = (snapshot.pk, snapshot.started_at), list(batch)
    spellings = _KEPT.get(key)
    fresh = spellings is None
    if fresh:
        spellings = _KEPT[key] = _read(snapshot.pk)
        while len(_KEPT) > KEPT:
            _KEPT.popitem(last=False)
    _KEPT.move_to_end(key)
    for node, hostname in batch:
        spellings.learn(node, hostname)
    hosts = SnapshotHosts(key, spellings, batch)
    hosts.reread = fresh  # read whole just now: a name it does not know is not in the database
    return hosts
