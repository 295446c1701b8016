"""What NCCL itself reports choosing on each node (version, net plugin, transport, interfaces,
CUDA driver), compared across nodes like the environment; and which node an address is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from operator import attrgetter, itemgetter

from analysis.stacks import compact_ranks

_NODE_LIST_CAP = 12
_FACT = itemgetter(2)  # of (node, rank, fact)
_KEY = attrgetter("key")
_KEY_VALUE = attrgetter("key", "value")


def _node_of_host(snap) -> dict[str, str]:
    names = {}
    for node, facts in snap.nodes.items():
        names[node] = node
        if facts.hostname:
            names[facts.hostname] = node
    return names


def _config_node(snap, node: str, host: str | None, hosts: dict[str, str]) -> str:
    """The node a config line describes: the host in its NCCL prefix when that is a known node
    (logs may sit on shared storage), else the node whose log holds it."""
    if host:
        return hosts.get(host) or hosts.get(host.split(".", 1)[0]) or node
    return node


def _owners(snap, hosts: dict[str, str]) -> Callable[[str, str | None], str]:
    """_config_node, once per (node, host): every rank of a node prints the same prefix."""
    known: dict[tuple[str, str | None], str] = {}

    def owner(node: str, host: str | None) -> str:
        found = known.get((node, host))
        if found is None:
            found = known[(node, host)] = _config_node(snap, node, host, hosts)
        return found

    return owner


def node_addresses(snap) -> dict[str, str]:
    """Address or host name -> node, from NCCL's Bootstrap / NET lines and the nodes' names."""
    hosts = _node_of_host(snap)
    table = dict(hosts)
    owner_of = _owners(snap, hosts)
    read: set[tuple] = set()  # a node's ranks print the same lines: the first one tells
    for node, _rank, fact in snap.nccl_config:
        said = (node, fact.host, fact.addresses)
        if said in read or (not fact.addresses and not fact.host):
            continue
        read.add(said)
        owner = owner_of(node, fact.host)
        for address in fact.addresses:
            table.setdefault(address, owner)
        if fact.host:
            table.setdefault(fact.host, owner)
            table.setdefault(fact.host.split(".", 1)[0], owner)
    return table


def nccl_config_diffs(snap) -> list[dict]:
    """Every configuration key whose value is not the same on all nodes that reported it."""
    facts = list(map(_FACT, snap.nccl_config))
    said = set(map(_KEY_VALUE, facts))  # in C: a fleet's 64,000 lines say a few things
    if len(said) == len(set(map(_KEY, facts))):
        return []  # one value a key on every line: on every node
    hosts = _node_of_host(snap)
    values: dict[str, dict[str, str]] = defaultdict(dict)  # key -> node -> value
    reporters: dict[str, set[int]] = defaultdict(set)  # node -> ranks that reported its lines
    lines: dict[tuple[str, str], str] = {}
    owner_of = _owners(snap, hosts)
    for node, rank, fact in snap.nccl_config:
        owner = owner_of(node, fact.host)
        values[fact.key].setdefault(owner, fact.value)
        lines.setdefault((fact.key, owner), fact.line)
        if rank is not None:
            reporters[owner].add(rank)
    for rank, state in snap.ranks.items():
        reporters[state.node].add(rank)
    diffs = []
    for key in sorted(values):
        by_value: dict[str, list[str]] = defaultdict(list)
        for owner, value in values[key].items():
            by_value[value].append(owner)
        if len(by_value) < 2:
            continue
        ordered = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        minority = sorted(n for _, nodes in ordered[1:] for n in nodes)
        # A tie names no culprit: two halves that differ say "look here", not "it is them".
        tie = len(ordered[0][1]) == len(ordered[1][1])
        diffs.append(
            {
                "name": key,
                "values": [
                    {
                        "value": value,
                        "nodes": sorted(nodes)[:_NODE_LIST_CAP],
                        "node_count": len(nodes),
                        "ranks": compact_ranks(r for n in nodes for r in reporters.get(n, ())),
                    }
                    for value, nodes in ordered
                ],
                "minority_nodes": [] if tie else minority,
                "minority_ranks": []
                if tie
                else sorted({r for n in minority for r in reporters.get(n, ())}),
                "lines": [lines[(key, n)] for n in minority[:3]],
            }
        )
    return diffs
