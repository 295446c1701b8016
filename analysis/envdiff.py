"""Which NCCL_/TORCH_/CUDA_/GLOO_ variables differ across ranks, and shell start-up leftovers."""

from __future__ import annotations

from collections import defaultdict

from analysis.parsers.shell_init import ShellInitSetting
from analysis.stacks import compact_ranks, nodes_of

UNSET = "<unset>"
# Variables that legitimately differ per rank or per launch: reported, but not a suspect.
PER_RANK = frozenset(
    {
        "TORCHELASTIC_ERROR_FILE",
        "CUDA_VISIBLE_DEVICES",
        "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_RUN_ID",
    }
)
_NODE_LIST_CAP = 12


def env_diffs(env: dict[int, dict[str, str]], rank_node: dict[int, str]) -> list[dict]:
    """Every variable whose value is not the same on all ranks that have an environment."""
    if len(env) < 2:
        return []
    alike = _alike(env)
    names: set[str] = set()
    for variables, _ in alike.values():
        names.update(variables)
    diffs = []
    for name in sorted(names):
        by_value: dict[str, list[int]] = defaultdict(list)
        for variables, ranks in alike.values():
            by_value[variables.get(name, UNSET)].extend(ranks)
        if len(by_value) < 2:
            continue
        values = []
        for value, ranks in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            nodes = sorted(nodes_of(ranks, rank_node))
            values.append(
                {
                    "value": value,
                    "ranks": compact_ranks(ranks),
                    "rank_count": len(ranks),
                    "nodes": nodes[:_NODE_LIST_CAP],
                    "node_count": len(nodes),
                }
            )
        diffs.append({"name": name, "values": values, "expected_per_rank": name in PER_RANK})
    return diffs


def _alike(env: dict[int, dict[str, str]]) -> dict[tuple, tuple[dict[str, str], list[int]]]:
    """Each distinct environment (by content) with its ranks."""
    # Ranks that share one environment object (a stored node parse keeps one for a node's
    # ranks when they are alike) are read once: variables x environments, not x ranks.
    shared: dict[int, tuple[dict[str, str], list[int]]] = {}
    for rank, variables in env.items():
        found = shared.get(id(variables))
        if found is None:
            found = shared[id(variables)] = (variables, [])
        found[1].append(rank)
    # Then environments alike in content once (each node's object is its own, most hold the
    # same): variables x distinct environments. First by names and values as they come (two
    # flat tuples a rank: half the cost of its sorted items), then those few by content.
    spelled: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[dict[str, str], list[int]]] = {}
    for variables, ranks in shared.values():
        key = (tuple(variables), tuple(variables.values()))
        found = spelled.get(key)
        if found is None:
            spelled[key] = (variables, ranks)
        else:
            found[1].extend(ranks)
    alike: dict[tuple[tuple[str, str], ...], tuple[dict[str, str], list[int]]] = {}
    for variables, ranks in spelled.values():
        key = tuple(sorted(variables.items()))
        found = alike.get(key)
        if found is None:
            alike[key] = (variables, ranks)
        else:
            found[1].extend(ranks)
    return alike


def minority_ranks(
    diff: dict,
    env: dict[int, dict[str, str]],
    rank_node: dict[int, str] | None = None,
    shell: list[dict] | None = None,
) -> set[int]:
    """The ranks whose value for this variable is the odd one out.

    The reference value is, in order: the one not set by a shell start-up file on the ranks'
    nodes (a leftover export is the usual culprit); the most common one; on a tie, rank 0's
    (rank 0 hosts the rendezvous, so its MASTER_PORT is the one the job listens on).
    """
    name = diff["name"]
    groups: dict[str, set[int]] = defaultdict(set)
    for rank, variables in env.items():
        groups[variables.get(name, UNSET)].add(rank)
    shell_nodes = {item["node"] for item in shell or [] if item["name"] == name}
    rank_node = rank_node or {}

    def set_by_shell(ranks: set[int]) -> bool:
        return bool(shell_nodes) and all(rank_node.get(r) in shell_nodes for r in ranks)

    def preference(item: tuple[str, set[int]]) -> tuple:
        value, ranks = item
        return (not set_by_shell(ranks), len(ranks), 0 in ranks, value)

    reference = max(groups.items(), key=preference)[0]
    return {rank for value, ranks in groups.items() if value != reference for rank in ranks}


def shell_init_findings(node_settings: dict[str, list[ShellInitSetting]]) -> list[dict]:
    findings = []
    for node in sorted(node_settings):
        for setting in node_settings[node]:
            findings.append(
                {
                    "node": node,
                    "path": setting.path,
                    "line_number": setting.line_number,
                    "name": setting.name,
                    "value": setting.value,
                    "line": setting.line,
                }
            )
    return findings
