"""Which NCCL_/TORCH_/CUDA_/GLOO_ variables differ across ranks, and shell start-up leftovers."""

from __future__ import annotations

from collections import defaultdict

from analysis.parsers.shell_init import ShellInitSetting
from analysis.stacks import compact_ranks

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
    names: set[str] = set()
    for variables in env.values():
        names.update(variables)
    diffs = []
    for name in sorted(names):
        by_value: dict[str, list[int]] = defaultdict(list)
        for rank, variables in env.items():
            by_value[variables.get(name, UNSET)].append(rank)
        if len(by_value) < 2:
            continue
        values = []
        for value, ranks in sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            nodes = sorted({rank_node.get(r, "?") for r in ranks})
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


def minority_ranks(diff: dict, env: dict[int, dict[str, str]]) -> set[int]:
    """Ranks holding any value other than the most common one for this variable."""
    majority = diff["values"][0]["value"]
    return {
        rank for rank, variables in env.items() if variables.get(diff["name"], UNSET) != majority
    }


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
