"""Preflight: do every rank's NCCL_/TORCH_/CUDA_ environment, the nodes' shell start-up files
and NCCL's reported configuration agree? Pure: the evidence comes from an SSH visit of every
node (like a snapshot's) or from the latest snapshot; the comparisons are the diagnosis's own
(analysis.envdiff, analysis.ncclconf)."""

from __future__ import annotations

from analysis.envdiff import env_diffs, shell_init_findings
from analysis.evidence import SnapshotEvidence
from analysis.ncclconf import nccl_config_diffs
from analysis.snapshot_parse import parse_snapshot
from analysis.stacks import compact_ranks
from hangdesk.masking import mask_environment, mask_text, mask_value

PREFIXES = ("NCCL_", "TORCH_", "CUDA_")
REPORT_VERSION = 1


def preflight_report(evidence: SnapshotEvidence) -> dict:
    """{"ok", "ranks", "nodes", "expected_world_size", "missing_ranks", "env_diffs",
    "shell_init", "nccl_diffs", "unreachable"}: ok is False when ranks differ, a rank of the
    expected world size has no training process (only checked once any rank runs), a
    start-up file sets NCCL_ variables (it will make them differ at the next launch), or a
    node could not be read."""
    parsed = parse_snapshot(evidence, flight_recorder=False)
    rank_node = {rank: state.node for rank, state in parsed.ranks.items()}
    # Values are shown on pages and printed: masked, with a keyed fingerprint, so different
    # secrets still differ.
    env = {
        rank: mask_environment({k: v for k, v in variables.items() if k.startswith(PREFIXES)})
        for rank, variables in parsed.env.items()
    }
    diffs = [d for d in env_diffs(env, rank_node) if not d["expected_per_rank"]]
    per_rank = [d["name"] for d in env_diffs(env, rank_node) if d["expected_per_rank"]]
    shell = [
        {**item, "value": mask_value(item["name"], item["value"]), "line": mask_text(item["line"])}
        for item in shell_init_findings({n: f.shell_init for n, f in parsed.nodes.items()})
    ]
    nccl = nccl_config_diffs(parsed)
    unreachable = sorted(node.node for node in evidence.nodes if not node.status.gathered)
    world = parsed.expected_world_size
    # Before the job starts there is nothing to count; once one rank runs, all must.
    missing = sorted(set(range(world)) - set(env)) if world and env else []
    ok = not diffs and not shell and not nccl and not unreachable and not missing
    absent = {
        "world": world,
        "missing": missing,
        "from": "the cluster's setting" if evidence.expected_world_size else "WORLD_SIZE",
    }
    return {
        "version": REPORT_VERSION,
        "ok": ok,
        "summary": _summary(ok, diffs, shell, nccl, unreachable, len(env), absent),
        "ranks": sorted(env),
        "expected_world_size": world,
        "missing_ranks": missing,
        "nodes": sorted(parsed.nodes),
        "env_diffs": diffs,
        "per_rank_variables": per_rank,
        "shell_init": shell,
        "nccl_diffs": nccl,
        "unreachable": unreachable,
    }


def _summary(ok, diffs, shell, nccl, unreachable, ranks: int, absent: dict) -> str:
    if ok:
        if ranks == 0:
            return "No training process found; no NCCL_ variable in the start-up files."
        return (
            f"All {ranks} ranks of world size {absent['world'] or ranks} agree on "
            "NCCL_/TORCH_/CUDA_; no NCCL_ in start-up files."
        )
    parts = []
    if absent["missing"]:
        parts.append(
            f"{ranks} of {absent['world']} ranks found ({absent['from']}): "
            f"{'rank' if len(absent['missing']) == 1 else 'ranks'} "
            f"{compact_ranks(absent['missing'])} missing"
        )
    if diffs:
        parts.append("ranks differ in " + ", ".join(d["name"] for d in diffs[:6]))
    if shell:
        where = sorted({f"{s['node']}:{s['path']}" for s in shell})
        parts.append("NCCL_ set in " + ", ".join(where[:6]))
    if nccl:
        parts.append("NCCL reports different " + ", ".join(d["name"] for d in nccl[:6]))
    if unreachable:
        parts.append("could not read " + ", ".join(unreachable[:6]))
    return "; ".join(parts)
