"""Everyone came to the same meeting (C), the CPU side, and what logs alone can say."""

from __future__ import annotations

from analysis import quotes
from analysis.envdiff import minority_ranks
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.rules.base import step_text
from analysis.verdict import SECOND_SNAPSHOT, Quote, QuoteKind, ranks_text


def nccl_config_differs(facts: Facts) -> Finding | None:
    """NCCL itself reports another version, net plugin or transport on a minority of nodes."""
    odd = [d for d in facts.nccl_diffs if d["minority_nodes"]]
    if not odd or facts.outside:
        return None
    suspects = sorted({r for d in odd for r in d["minority_ranks"]})
    nodes = sorted({n for d in odd for n in d["minority_nodes"]})
    evidence = [Quote(QuoteKind.NCCL_CONFIG, None, None, quotes.diff_text(d)) for d in odd[:4]]
    evidence += [
        Quote(QuoteKind.NCCL_CONFIG, n, None, line)
        for d in odd[:2]
        for n, line in zip(d["minority_nodes"], d["lines"], strict=False)
    ]
    names = ", ".join(d["name"] for d in odd[:3])
    return Finding(
        "C",
        0.7,
        f"NCCL reports a different configuration ({names}) on {', '.join(nodes[:5])} than on "
        f"the other nodes{'; ' + ranks_text(suspects) + ' run there' if suspects else ''}. "
        "Align the NCCL version, net plugin and transport across nodes.",
        suspects=tuple(suspects),
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        check=(
            f"Run with NCCL_DEBUG=INFO on {nodes[0]} and on a node that works: the NCCL version, "
            "NET/ plugin and transport lines should match."
        ),
        rule="nccl_config_differs",
    )


def same_collective(facts: Facts) -> Finding | None:
    """Everyone came to the same meeting and nobody is missing: the steps differ (C)."""
    if not facts.in_collective or len(facts.ops) != 1 or facts.outside:
        return None
    waiting = list(facts.in_collective)
    evidence = quotes.stack(facts, waiting[0])
    suspects: set[int] = set()
    nodes: set[str] = set()
    found = []
    for diff in (d for d in facts.env_diffs if not d["expected_per_rank"]):
        ranks = sorted(minority_ranks(diff, facts.snap.env, facts.rank_node, facts.shell))
        suspects.update(ranks)
        rank = ranks[0] if len(ranks) == 1 else None
        evidence.append(Quote(QuoteKind.ENV_DIFF, None, rank, quotes.diff_text(diff)))
        found.append(diff["name"])
    for item in facts.shell:
        nodes.add(item["node"])
        found.append(f"{item['name']} in {item['path']} on {item['node']}")
    for diff in facts.nccl_diffs:
        suspects.update(diff["minority_ranks"])
        nodes.update(diff["minority_nodes"])
        evidence.append(Quote(QuoteKind.NCCL_CONFIG, None, None, quotes.diff_text(diff)))
        found.append(f"NCCL {diff['name']}")
    fatal = [
        (n, x)
        for n, f in sorted(facts.nodes.items())
        for x in f.kernel.xids
        if x.fatal and not facts.before_job(x.line)
    ]
    found += [f"Xid {xid.xid} on {node}" for node, xid in fatal]
    for _, log in facts.snap.logs_of_note:
        if log.nccl_warn:  # a few logs of a big job
            evidence += [
                Quote(QuoteKind.NCCL_WARN, None, f.rank, f.line) for f in log.nccl_warn[-2:]
            ]
    lead = (
        f"All {len(waiting)} ranks are present and wait in the same {facts.main_op()}"
        f"{step_text(facts)}; nobody is missing."
    )
    if found:
        confidence = 0.75
        summary = f"{lead} Look at the environment and network: {', '.join(found[:3])}."
    else:
        confidence = 0.5
        summary = (
            f"{lead} No environment difference found: check the network "
            "(NCCL_SOCKET_IFNAME, IB links, ibstat) and NCCL WARN lines."
        )
    return Finding(
        "C",
        confidence,
        summary,
        suspects=tuple(sorted(suspects)),
        suspect_nodes=tuple(sorted(nodes)),
        evidence=tuple(evidence),
        check=(
            "Compare `env | grep NCCL_` and the NCCL INFO lines (interface, transport) across "
            "nodes, and `ibstat` on each: the ranks came to the same collective, so the "
            "difference is in the set-up or the network."
        ),
        rule="same_collective",
    )


def cpu_side(facts: Facts) -> Finding | None:
    if not facts.outside or facts.in_collective:
        return None
    outside = list(facts.outside)
    return Finding(
        "A",
        0.4,
        f"No rank is inside a collective: {ranks_text(outside)} are stuck on the CPU side "
        f"({facts.ranks[outside[0]].innermost_frame}). Look at data loading, I/O and locks.",
        suspects=tuple(outside),
        evidence=tuple(quotes.stacks(facts, outside)),
        check=(
            f"py-spy dump --native --pid on {ranks_text(outside[:3])} twice, a minute apart: "
            f"still in {facts.ranks[outside[0]].innermost_frame or 'the same frame'} means stuck "
            "there (data loader, I/O, a lock)."
        ),
        rule="cpu_side",
    )


def undecided(facts: Facts) -> Finding:
    return Finding(
        "unknown",
        0.2,
        "Not enough evidence to classify: no stack, flight-recorder or watchdog evidence decides.",
        next_steps=(SECOND_SNAPSHOT,),
        check=(
            "py-spy dump of every rank, each node's dmesg and the training logs: a snapshot of "
            "the cluster."
        ),
        rule="undecided",
    )
