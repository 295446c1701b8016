"""Presentation of a verdict: stack groups, per-rank rows, node evidence, and the evidence
ordered (suspects first) and bounded. Nothing here decides the class."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from analysis.facts import Facts
from analysis.quotes import why_lost
from analysis.records import GroupKind, RankRow, RankStatus, StackGroup
from analysis.snapshot_parse import RankState
from analysis.stacks import nodes_of
from analysis.verdict import Quote, QuoteKind

EVIDENCE_CAP = 40
_NODE_CAP = 24
_STACK_SAMPLE = 15
_MISSING_QUOTED = 12


def stack_groups(facts: Facts) -> list[StackGroup]:
    """Ranks grouped by identical stacks, then the ranks without one, largest group first."""
    by_signature: dict[str, list[RankState]] = defaultdict(list)
    no_stack: list[int] = []
    states = facts.ranks
    for rank in sorted(states):
        state = states[rank]
        if state.stack_signature:
            by_signature[state.stack_signature].append(state)
        elif state.process_seen:
            no_stack.append(rank)
    groups = []
    for signature, members in by_signature.items():
        head = members[0]
        name, _, location = head.innermost_frame.partition(" (")
        ranks = [m.rank for m in members]
        kind = GroupKind.read(head.frame_kind)
        groups.append(_group(facts, signature, name, location.rstrip(")"), kind, ranks, head.stack))
    exited = set(facts.exited)
    missing_only = [r for r in facts.missing if r not in exited]
    log_only = sorted(r for r in facts.no_process if r in facts.observed)
    missing = set(facts.missing)
    log_only = [r for r in log_only if r not in exited and r not in missing]
    for label, kind, ranks in (
        ("(absent)", GroupKind.MISSING, missing_only),
        ("(exited)", GroupKind.EXITED, sorted(exited)),
        ("(no stack)", GroupKind.NO_STACK, no_stack),
        ("(log only)", GroupKind.LOG_ONLY, log_only),
        ("(unobserved)", GroupKind.UNOBSERVED, list(facts.unobserved)),
    ):
        if ranks:
            groups.append(_group(facts, "", label, "", kind, ranks, []))
    groups.sort(key=lambda g: (-g.rank_count, g.frame, g.signature))
    return [replace(group, index=index) for index, group in enumerate(groups)]


def _group(facts: Facts, signature, frame, location, kind, ranks, stack) -> StackGroup:
    nodes = sorted(nodes_of(ranks, facts.rank_node))
    return StackGroup(
        index=0,
        kind=kind,
        frame=frame,
        rank_list=tuple(ranks),
        signature=signature,
        location=location,
        nodes=tuple(nodes[:_NODE_CAP]),
        node_count=len(nodes),
        stack=tuple(stack[:_STACK_SAMPLE]),
    )


def node_evidence(facts: Facts, suspect_nodes: set[str]) -> list[Quote]:
    """What each node says on its own: unreachable, GPU faults, OOM kills, GPU load, leftovers."""
    quoted = []
    for node, node_facts in sorted(facts.nodes.items()):
        if not node_facts.status.gathered:
            quoted.append(
                Quote(QuoteKind.NODE_UNREACHABLE, node, None, node_facts.status.describe())
            )
        for xid in node_facts.kernel.xids:
            if not facts.before_job(xid.line):
                quoted.append(Quote(QuoteKind.XID, node, None, f"{xid.line}  [{xid.meaning}]"))
        for kill in facts.job_kills(node_facts):
            quoted.append(Quote(QuoteKind.DMESG_OOM, node, None, kill.line))
        busy = [g for g in node_facts.gpus.gpus if g.utilization is not None]
        # GPU load says most on the suspects' nodes (100 % idle-spin vs 0 % CPU-side).
        if busy and (node in suspect_nodes or len(facts.nodes) <= 8):
            text = ", ".join(
                f"GPU {g.index} {g.utilization}% ({g.memory_used_mib}MiB)" for g in busy[:8]
            )
            quoted.append(Quote(QuoteKind.GPU, node, None, text))
    quoted += [Quote(QuoteKind.SHELL_INIT, i["node"], None, i["line"]) for i in facts.shell]
    return quoted


def missing_evidence(facts: Facts, quoted: list[Quote]) -> list[Quote]:
    """A line naming every missing rank that the verdict did not already explain."""
    named = {e.rank for e in quoted}
    lines = []
    for rank in facts.missing:
        if rank not in named and len(lines) < _MISSING_QUOTED:
            text = f"rank {rank}: {why_lost(facts, rank)}"
            lines.append(Quote(QuoteKind.MISSING, facts.node_of(rank), rank, text))
    return lines


def ordered_evidence(
    items: list[Quote], suspects: set[int], suspect_nodes: set[str]
) -> list[Quote]:
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


def per_rank_rows(facts: Facts, suspects: set[int], groups: list[StackGroup]) -> list[RankRow]:
    group_of: dict[int, int] = {}  # a rank's first group: the later ones written first
    for group in reversed(groups):
        group_of.update(dict.fromkeys(group.rank_list, group.index))
    exited, missing, unobserved = set(facts.exited), set(facts.missing), set(facts.unobserved)
    set_apart = exited | missing | unobserved
    states = facts.ranks
    rows = []
    for rank in sorted(set(range(facts.world)) | set(states)):
        state = states.get(rank)
        if state is None or rank in set_apart:
            status = _status(rank, state, exited, missing, unobserved)
        else:  # most ranks at fleet scale: alive, seen, nothing else to ask
            status = _seen_status(state)
        if state is None:
            node, group = facts.node_of(rank), group_of.get(rank)
            rows.append(RankRow(rank, status, node, suspect=rank in suspects, stack_group=group))
            continue
        rows.append(  # positional, in RankRow's field order: 32,000 of these at fleet scale
            RankRow(
                rank,
                status,
                state.node,
                state.pid,
                state.state,
                state.local_rank,
                rank in suspects,
                state.last_step,
                state.last_step_at,
                state.step_time,
                state.innermost_frame,
                state.stack_signature,
                group_of.get(rank),
                state.exit_code,
                state.gpu_util,
            )
        )
    return rows


_FRAME_STATUS = {
    "collective": RankStatus.IN_COLLECTIVE,
    "init": RankStatus.INIT,
    "outside": RankStatus.OUTSIDE,
}


def _status(rank, state, exited, missing, unobserved) -> RankStatus:
    if rank in exited:
        return RankStatus.EXITED
    if rank in missing:
        return RankStatus.MISSING
    if rank in unobserved or state is None:
        return RankStatus.UNOBSERVED
    return _seen_status(state)


def _seen_status(state) -> RankStatus:
    """A rank seen and not set apart (exited, missing, unobserved): where its stack is."""
    if state.frame_kind in _FRAME_STATUS:
        return _FRAME_STATUS[state.frame_kind]
    return RankStatus.NO_STACK if state.process_seen else RankStatus.LOG_ONLY
