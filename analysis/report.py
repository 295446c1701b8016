"""Presentation of a verdict: stack groups, per-rank rows, node evidence, and the evidence
ordered (suspects first) and bounded. Nothing here decides the class."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from analysis.facts import Facts, iso
from analysis.quotes import why_lost
from analysis.ranks import RankState
from analysis.stacks import compact_ranks
from analysis.verdict import Evidence

EVIDENCE_CAP = 40
_NODE_CAP = 24
_STACK_SAMPLE = 15
_MISSING_QUOTED = 12


def stack_groups(facts: Facts) -> list[dict[str, Any]]:
    """Ranks grouped by identical stacks, then the ranks without one, largest group first."""
    by_signature: dict[str, list[RankState]] = defaultdict(list)
    no_stack: list[int] = []
    for rank in sorted(facts.ranks):
        state = facts.ranks[rank]
        if state.stack_signature:
            by_signature[state.stack_signature].append(state)
        elif state.process_seen:
            no_stack.append(rank)
    groups = []
    for signature, members in by_signature.items():
        head = members[0]
        name, _, location = head.innermost_frame.partition(" (")
        ranks = [m.rank for m in members]
        groups.append(
            _group(facts, signature, name, location.rstrip(")"), head.frame_kind, ranks, head.stack)
        )
    exited = set(facts.exited)
    missing_only = [r for r in facts.missing if r not in exited]
    log_only = sorted(r for r in facts.observed if r in facts.ranks and not _live(facts, r))
    log_only = [r for r in log_only if r not in exited and r not in set(facts.missing)]
    for label, kind, ranks in (
        ("(absent)", "missing", missing_only),
        ("(exited)", "exited", sorted(exited)),
        ("(no stack)", "no_stack", no_stack),
        ("(log only)", "log_only", log_only),
        ("(unobserved)", "unobserved", list(facts.unobserved)),
    ):
        if ranks:
            groups.append(_group(facts, "", label, "", kind, ranks, []))
    groups.sort(key=lambda g: (-g["rank_count"], g["frame"], g["signature"]))
    for index, group in enumerate(groups):
        group["index"] = index
    return groups


def _live(facts: Facts, rank: int) -> bool:
    state = facts.ranks.get(rank)
    return bool(state and state.process_seen)


def _group(facts: Facts, signature, frame, location, kind, ranks, stack) -> dict[str, Any]:
    nodes = sorted({facts.rank_node.get(r, "?") for r in ranks})
    return {
        "signature": signature,
        "frame": frame,
        "location": location,
        "kind": kind,
        "ranks": compact_ranks(ranks),
        "rank_list": ranks,
        "rank_count": len(ranks),
        "nodes": nodes[:_NODE_CAP],
        "node_count": len(nodes),
        "stack": stack[:_STACK_SAMPLE],
    }


def node_evidence(facts: Facts, suspect_nodes: set[str]) -> list[Evidence]:
    """What each node says on its own: unreachable, GPU faults, OOM kills, GPU load, leftovers."""
    quoted = []
    for node, node_facts in sorted(facts.nodes.items()):
        if node_facts.status != "ok":
            quoted.append(Evidence("node_unreachable", node, None, node_facts.status))
        for xid in node_facts.kernel.xids:
            quoted.append(Evidence("xid", node, None, f"{xid.line}  [{xid.meaning}]"))
        for kill in facts.job_kills(node_facts):
            quoted.append(Evidence("dmesg_oom", node, None, kill.line))
        busy = [g for g in node_facts.gpus.gpus if g.utilization is not None]
        # GPU load says most on the suspects' nodes (100 % idle-spin vs 0 % CPU-side).
        if busy and (node in suspect_nodes or len(facts.nodes) <= 8):
            text = ", ".join(
                f"GPU {g.index} {g.utilization}% ({g.memory_used_mib}MiB)" for g in busy[:8]
            )
            quoted.append(Evidence("gpu", node, None, text))
    quoted += [Evidence("shell_init", i["node"], None, i["line"]) for i in facts.shell]
    return quoted


def missing_evidence(facts: Facts, quoted: list[Evidence]) -> list[Evidence]:
    """A line naming every missing rank that the verdict did not already explain."""
    named = {e.rank for e in quoted}
    lines = []
    for rank in facts.missing:
        if rank not in named and len(lines) < _MISSING_QUOTED:
            text = f"rank {rank}: {why_lost(facts, rank)}"
            lines.append(Evidence("missing", facts.node_of(rank), rank, text))
    return lines


def ordered_evidence(
    items: list[Evidence], suspects: set[int], suspect_nodes: set[str]
) -> list[Evidence]:
    """Each line once (a line quoted for a rank is not repeated for its node alone); the
    suspects' lines first, then the rest in the order found; bounded in size."""
    seen: set[tuple] = set()
    unique = []
    for item in items:
        key, quoted = (
            (item.kind, item.node, item.rank, item.text),
            (
                item.kind,
                item.node,
                None,
                item.text,
            ),
        )
        if key in seen or quoted in seen:
            continue
        seen.update({key, quoted})
        unique.append(item)
    ordered = sorted(
        enumerate(unique),
        key=lambda pair: (
            0 if pair[1].rank in suspects or pair[1].node in suspect_nodes else 1,
            pair[0],
        ),
    )
    return [item for _, item in ordered[:EVIDENCE_CAP]]


def per_rank_rows(
    facts: Facts, suspects: set[int], groups: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    group_of: dict[int, int] = {}
    for group in groups:
        for rank in group["rank_list"]:
            group_of.setdefault(rank, group["index"])
    exited, missing, unobserved = set(facts.exited), set(facts.missing), set(facts.unobserved)
    rows = []
    for rank in sorted(set(range(facts.world)) | set(facts.ranks)):
        state = facts.ranks.get(rank)
        rows.append(
            {
                "rank": rank,
                "node": state.node if state else facts.node_of(rank),
                "pid": state.pid if state else None,
                "state": state.state if state else "",
                "local_rank": state.local_rank if state else None,
                "status": _status(rank, state, exited, missing, unobserved),
                "suspect": rank in suspects,
                "last_step": state.last_step if state else None,
                "last_step_at": iso(state.last_step_at) if state else None,
                "step_time": state.step_time if state else None,
                "frame": state.innermost_frame if state else "",
                "stack_signature": state.stack_signature if state else "",
                "stack_group": group_of.get(rank),
                "exit_code": state.exit_code if state else None,
                "gpu_util": state.gpu_util if state else None,
            }
        )
    return rows


def _status(rank, state, exited, missing, unobserved) -> str:
    if rank in exited:
        return "exited"
    if rank in missing:
        return "missing"
    if rank in unobserved or state is None:
        return "unobserved"
    if state.frame_kind == "collective":
        return "in_collective"
    if state.frame_kind in ("init", "outside"):
        return state.frame_kind
    return "no_stack" if state.process_seen else "log_only"
