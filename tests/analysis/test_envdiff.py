"""Environment differences across ranks, from real /proc/PID/environ captures."""

from analysis.envdiff import env_diffs
from tests.analysis.sample_evidence import diagnosis_json, load_snapshot, split_nodes


def test_it_lists_variables_that_differ_with_their_ranks_and_nodes():
    diffs = {
        d["name"]: d
        for d in diagnosis_json(split_nodes(load_snapshot("healthy", "snap0")))["env_diffs"]
    }
    ifname = diffs["NCCL_SOCKET_IFNAME"]
    assert ifname["expected_per_rank"] is False
    assert ifname["values"] == [
        {
            "value": "<unset>",
            "ranks": "0-2",
            "rank_count": 3,
            "nodes": ["lab-node-0", "lab-node-1"],
            "node_count": 2,
        },
        {"value": "eth1", "ranks": "3", "rank_count": 1, "nodes": ["lab-node-1"], "node_count": 1},
    ]
    assert "NCCL_IB_DISABLE" in diffs
    # same on every rank: not a difference
    assert "NCCL_DEBUG" not in diffs and "TORCH_FR_BUFFER_SIZE" not in diffs


def test_it_marks_per_rank_variables_as_expected():
    env = {0: {"CUDA_VISIBLE_DEVICES": "0"}, 1: {"CUDA_VISIBLE_DEVICES": "1"}}
    (diff,) = env_diffs(env, {0: "a", 1: "a"})
    assert diff["expected_per_rank"] is True


def test_it_ignores_variables_outside_the_comms_prefixes():
    env = {0: {"NCCL_DEBUG": "INFO"}, 1: {"NCCL_DEBUG": "WARN"}}
    assert [d["name"] for d in env_diffs(env, {0: "a", 1: "b"})] == ["NCCL_DEBUG"]
    assert env_diffs({0: {"NCCL_DEBUG": "INFO"}}, {0: "a"}) == []


def test_environments_alike_in_content_but_read_in_another_order_are_one_value():
    # Each rank's own object; ranks 1 and 3 read their variables in another order.
    env = {
        0: {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"},
        1: {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"},
        2: {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth1"},
        3: {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "INFO"},
    }
    nodes = {0: "a", 1: "a", 2: "b", 3: "b"}
    (diff,) = env_diffs(env, nodes)
    assert diff["name"] == "NCCL_SOCKET_IFNAME"
    assert [(v["value"], v["ranks"], v["nodes"]) for v in diff["values"]] == [
        ("eth0", "0-1, 3", ["a", "b"]),
        ("eth1", "2", ["b"]),
    ]
