"""What a farm node answers, built without a running farm (lab/farm_nodes.py)."""

import ast
import pickle

from lab import farm_nodes


def _default_group_members(answer: bytes) -> list[list[int]]:
    members = []
    for key, body in farm_nodes.split_frames(answer):
        if key.startswith("fr.") and not key.endswith(".path"):
            configs = pickle.loads(body)["pg_config"].values()  # noqa: S301 - the lab's own
            members += [
                ast.literal_eval(c["ranks"]) for c in configs if c.get("name", "") in ("", "0")
            ]
    return members


def test_the_dumps_list_the_farm_world_or_the_world_asked_for():
    capture = farm_nodes.Capture("rank-exit")
    nodes = farm_nodes.farm_nodes("none", [f"127.9.0.{i + 1}" for i in range(4)])
    own = farm_nodes.NodeAnswers(capture, nodes, capture.ranks_per_node)
    bigger = farm_nodes.NodeAnswers(capture, nodes, capture.ranks_per_node, dump_world=8000)

    small = _default_group_members(own.probe(nodes[1], "n1"))
    big = _default_group_members(bigger.probe(nodes[1], "n1"))
    assert len(small) == len(big) == capture.ranks_per_node
    assert all(m == list(range(4 * capture.ranks_per_node)) for m in small)
    assert all(m == list(range(8000)) for m in big)
