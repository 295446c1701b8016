"""`node_addresses` and `nccl_config_diffs`: each line's node from its NCCL prefix, read once
per node and host however many ranks print it."""

from __future__ import annotations

from types import SimpleNamespace

from analysis.ncclconf import nccl_config_diffs, node_addresses
from analysis.parsers.nccl import NcclConfigFact


def _net(host: str | None, address: str, value: str = "Socket") -> NcclConfigFact:
    line = f"{host}:5:5 [0] NCCL INFO NET/{value} : Using [0]eth0:{address}<0>"
    return NcclConfigFact(host, "net", value, (address,), line)


def _snap(config):
    nodes = {"n1": SimpleNamespace(hostname="n1.lab"), "n2": SimpleNamespace(hostname="")}
    ranks = {
        0: SimpleNamespace(node="n1"),
        1: SimpleNamespace(node="n1"),
        2: SimpleNamespace(node="n2"),
    }
    return SimpleNamespace(nodes=nodes, ranks=ranks, nccl_config=config)


def test_a_line_belongs_to_the_host_of_its_prefix_and_the_first_line_of_an_address_wins():
    config = [
        ("n1", 0, _net("n1.lab", "10.0.0.1")),
        ("n1", 1, _net("n1.lab", "10.0.0.1")),  # the node's second rank: the same line
        ("n1", 1, _net("n2", "10.0.0.2")),  # n2's line, read from n1's shared log
        ("n2", 2, _net(None, "10.0.0.1")),  # no prefix: its own node, but 10.0.0.1 is n1's
        ("n2", 2, _net(None, "10.0.0.3")),
    ]
    table = node_addresses(_snap(config))
    assert table["10.0.0.1"] == "n1" and table["10.0.0.2"] == "n2" and table["10.0.0.3"] == "n2"
    assert table["n1.lab"] == "n1" and table["n1"] == "n1" and table["n2"] == "n2"


def test_a_node_whose_ranks_all_print_another_net_is_the_minority_once():
    config = [
        ("n1", 0, _net("n1.lab", "10.0.0.1", "IB")),
        ("n1", 1, _net("n1.lab", "10.0.0.1", "IB")),
        ("n2", 2, _net("n2", "10.0.0.2")),
        ("n2", 2, _net("n2", "10.0.0.2")),
        ("n3", None, _net(None, "10.0.0.4", "IB")),
    ]
    snap = _snap(config)
    (diff,) = nccl_config_diffs(snap)
    assert diff["name"] == "net" and diff["minority_nodes"] == ["n2"]
    assert diff["minority_ranks"] == [2]
    assert [(v["value"], v["nodes"], v["ranks"]) for v in diff["values"]] == [
        ("IB", ["n1", "n3"], "0-1"),
        ("Socket", ["n2"], "2"),
    ]


def test_one_value_a_key_on_every_line_is_no_difference_and_two_on_one_node_neither():
    alike = [("n1", 0, _net("n1.lab", "10.0.0.1")), ("n2", 2, _net("n2", "10.0.0.2"))]
    assert nccl_config_diffs(_snap(alike)) == []
    # Two values of a key, both on one node: its first line says what it chose.
    again = [*alike, ("n2", 2, _net("n2", "10.0.0.2", "IB"))]
    assert nccl_config_diffs(_snap(again)) == []
    # A second value on another node is a difference, however few lines say it.
    other = [*alike, ("n2", 2, _net("n1.lab", "10.0.0.1", "IB"))]
    assert nccl_config_diffs(_snap(other)) == []  # n1's line read in n2's log: n1 said Socket
    third = [*alike, ("n3", None, _net(None, "10.0.0.4", "IB"))]
    assert [d["name"] for d in nccl_config_diffs(_snap(third))] == ["net"]
