"""Which side of an even split is the odd one: shell leftovers first, then rank 0's side."""

from analysis.envdiff import minority_ranks


def _diff(name: str) -> dict:
    return {"name": name}


ENV = {
    0: {"NCCL_SOCKET_IFNAME": "lo", "MASTER_PORT": "29500"},
    1: {"NCCL_SOCKET_IFNAME": "lo", "MASTER_PORT": "29500"},
    2: {"NCCL_SOCKET_IFNAME": "eth1", "MASTER_PORT": "29501"},
    3: {"NCCL_SOCKET_IFNAME": "eth1", "MASTER_PORT": "29501"},
}
NODES = {0: "node-0", 1: "node-0", 2: "node-1", 3: "node-1"}


def test_on_an_even_split_rank_0s_value_is_the_reference():
    assert minority_ranks(_diff("MASTER_PORT"), ENV, NODES) == {2, 3}


def test_a_value_set_by_a_shell_start_up_file_is_the_odd_one_even_against_rank_0():
    shell = [{"node": "node-0", "name": "NCCL_SOCKET_IFNAME"}]
    assert minority_ranks(_diff("NCCL_SOCKET_IFNAME"), ENV, NODES, shell) == {0, 1}
    shell = [{"node": "node-1", "name": "NCCL_SOCKET_IFNAME"}]
    assert minority_ranks(_diff("NCCL_SOCKET_IFNAME"), ENV, NODES, shell) == {2, 3}


def test_otherwise_the_most_common_value_wins():
    env = {**ENV, 1: {"NCCL_SOCKET_IFNAME": "eth1"}}
    assert minority_ranks(_diff("NCCL_SOCKET_IFNAME"), env, NODES) == {0}
