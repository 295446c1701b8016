"""Ranks out of order: different collectives (B), ranks that never reached one, peers named,
ranks that fell behind (A)."""

from __future__ import annotations

from collections import defaultdict

from analysis import quotes
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.groups import disagreements, lagging_in_group
from analysis.rules.base import step_text
from analysis.stacks import base_name
from analysis.verdict import Quote, QuoteKind, capitalised, ranks_text


def fr_different_collective(facts: Facts) -> Finding | None:
    """The flight recorder shows one group's ranks running different collectives (another op,
    sizes or dtypes their op's law does not allow, or the groups' collectives in different
    orders): B. The stops come cause first; the first of these kinds is the answer."""
    stop = next((s for s in facts.group_stops if s.kind in FR_DISAGREEING), None)
    if stop is None:
        return None
    culprits = list(stop.culprits)
    where = quotes.frame_of(facts, culprits, fallback=_culprits_frame(stop))
    who = (
        f"{capitalised(ranks_text(culprits))} left the others' order; look for a rank-dependent "
        f"branch near {where}."
        if culprits
        else "Nothing tells which side is right: compare their code paths."
    )
    sides = " and ".join(ranks_text(side.ranks[:3]) for side in stop.sides[:2])
    return Finding(
        "B",
        0.9 if culprits else 0.75,
        f"Ranks run different collectives (flight recorder): {stop.detail}. {who}",
        suspects=tuple(culprits),
        evidence=(*fr_evidence(facts, stop), *quotes.stacks(facts, culprits, limit=3)),
        check=(
            f"The stacks of {sides} at group {stop.group.key}'s collective #{stop.seq}: the "
            "branch that differs."
        ),
        rule="fr_different_collective",
    )


FR_DISAGREEING = frozenset(
    {
        "different_collective",
        "different_sizes",
        "different_dtypes",
        "invalid_sizes",
        "invalid_dtypes",
        "different_order",
    }
)
FR_ABSENT = frozenset({"missing_ranks", "unmatched_p2p"})


def _culprits_frame(stop) -> str:
    sides = [side for side in stop.sides if set(side.ranks) & set(stop.culprits)]
    return (sides or stop.sides[-1:] or [None])[0].frame if stop.sides else ""


def fr_evidence(facts: Facts, stop) -> list[Quote]:
    """A flight-recorder stop and the lines behind it, each tied to the rank it is about."""
    evidence = [Quote(QuoteKind.FLIGHT_RECORDER, None, None, stop.detail)]
    for line in stop.lines:
        head = line.split(":", 1)[0]
        rank = int(head[5:]) if head.startswith("rank ") and head[5:].isdigit() else None
        node = facts.rank_node.get(rank) if rank is not None else None
        evidence.append(Quote(QuoteKind.FLIGHT_RECORDER, node, rank, line))
    return evidence


def _verb(ranks, one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def detail_mismatch(facts: Facts) -> Finding | None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL compared the ranks' fingerprints and found them
    different: B, even when ranks then exited (the mismatch error is why they exited)."""
    return _logs_disagree(facts, frozenset({"detail"}), "detail_mismatch")


def logs_different_collective(facts: Facts) -> Finding | None:
    """Watchdog lines: at one group's sequence number, ranks report another op or size than
    their peers (the classic type B read from `kubectl logs`)."""
    return _logs_disagree(facts, frozenset({"watchdog", "detail"}), "logs_different_collective")


def _logs_disagree(facts: Facts, sources: frozenset[str], rule: str) -> Finding | None:
    found = disagreements(facts.collectives, sources, frozenset(facts.departures))
    if not found:
        return None
    first = found[0]
    group = f" of group {first.pg}" if first.pg else ""
    odd = first.minority or tuple(r for r in first.majority if first.lines)
    evidence = [Quote(QuoteKind.COLLECTIVE, None, None, line) for line in first.lines]
    for rank in first.majority[:1] if first.minority else ():
        evidence += [
            Quote(QuoteKind.COLLECTIVE, None, rank, r.line) for r in facts.collectives[rank][:1]
        ]
    if first.minority:
        evidence = [Quote(e.kind, e.node, first.minority[0], e.text) for e in evidence[:1]] + (
            evidence[1:]
        )
        what = (
            f"{ranks_text(first.minority)} {'runs' if len(first.minority) == 1 else 'run'} "
            f"{first.minority_op} while {ranks_text(first.majority)} run {first.majority_op}"
        )
        where = f" Look for a rank-dependent branch near {quotes.frame_of(facts, first.minority)}."
    else:
        what = f"{ranks_text(odd)} disagree ({first.majority_op} vs {first.minority_op})"
        where = " Nothing tells which side left the order: compare their code paths."
    return Finding(
        "B",
        0.85 if first.minority else 0.7,
        f"At collective #{first.seq}{group}, {what}: the ranks left the same order.{where}",
        suspects=first.minority,
        evidence=tuple(evidence),
        rule=rule,
    )


def outside_collective(facts: Facts) -> Finding | None:
    """Some ranks wait in a collective, others are alive elsewhere: A (they did not come)."""
    if not (facts.outside and facts.in_collective):
        return None
    outside, waiting = list(facts.outside), list(facts.in_collective)
    evidence = quotes.stacks(facts, outside) + quotes.stack(facts, waiting[0])
    # The flight recorder agrees when the groups stop at these ranks (victims aside).
    agreeing = [s for s in facts.group_stops if s.culprits and set(s.culprits) <= set(outside)]
    evidence += [quotes.flight_recorder(s.mismatch) for s in agreeing[:2]]
    state = facts.ranks[outside[0]]
    nodes = sorted({facts.rank_node[r] for r in outside})
    agrees = bool(agreeing)
    return Finding(
        "A",
        0.9 if agrees else 0.8,
        f"{capitalised(ranks_text(outside))} did not come: alive but stuck outside any "
        f"collective in {state.innermost_frame}, while {ranks_text(waiting)} wait in "
        f"{facts.main_op()}{step_text(facts)}. Look at {', '.join(nodes[:5])}: data "
        "loading, I/O, locks.",
        suspects=tuple(outside),
        evidence=tuple(evidence),
        check=(
            f"py-spy dump --pid on {ranks_text(outside[:3])} again in a minute: still in "
            f"{state.innermost_frame} means it is stuck there, not slow."
        ),
        rule="outside_collective",
    )


def stacks_different_collective(facts: Facts) -> Finding | None:
    mismatch_lines = [f for _, log in facts.snap.logs_of_note for f in log.mismatches]
    if len(facts.ops) < 2 and not mismatch_lines:
        return None
    by_op: dict[str, list[int]] = defaultdict(list)
    for rank in facts.in_collective:
        by_op[base_name(facts.ranks[rank].frame_name)].append(rank)
    ordered = sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    minority = [r for _, ranks in ordered[1:] for r in ranks]
    evidence = [Quote(QuoteKind.LOG_ERROR, None, f.rank, f.line) for f in mismatch_lines[:3]]
    evidence += quotes.stacks(facts, minority, limit=3)
    if ordered:
        evidence += quotes.stack(facts, ordered[0][1][0])
    parts = "; ".join(f"{ranks_text(r)} in {op}" for op, r in ordered[:3])
    return Finding(
        "B",
        0.8 if len(ordered) > 1 else 0.7,
        f"Ranks are in different collectives: {parts or 'see mismatch report'}. "
        f"Look for a rank-dependent branch near {quotes.frame_of(facts, minority)}.",
        suspects=tuple(minority),
        evidence=tuple(evidence),
        check=(
            "The flight recorder of every rank (TORCH_NCCL_TRACE_BUFFER_SIZE): the first "
            "sequence number at which the ops differ, and which rank issued the odd one."
        ),
        rule="stacks_different_collective",
    )


def different_call_sites(facts: Facts) -> Finding | None:
    if len(facts.signatures) < 2:
        return None
    by_sig: dict[str, list[int]] = defaultdict(list)
    for rank in facts.in_collective:
        by_sig[facts.ranks[rank].stack_signature].append(rank)
    ordered = sorted(by_sig.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    minority = [r for _, ranks in ordered[1:] for r in ranks]
    op = facts.main_op()
    return Finding(
        "B",
        0.55,
        f"All ranks are in {op} but from different call sites: {ranks_text(minority)} "
        f"call it elsewhere than {ranks_text(ordered[0][1])}. "
        "Compare the stacks: a rank-dependent branch?",
        suspects=tuple(minority),
        evidence=tuple(quotes.stacks(facts, [ordered[0][1][0], *minority[:3]])),
        check=(
            "Compare the full stacks of both groups of ranks: a collective called from two "
            "places in the code means a rank took another branch."
        ),
        rule="different_call_sites",
    )


def fr_never_reached(facts: Facts) -> Finding | None:
    """The flight recorder: a group's collective some members never issued (or left no dump
    for), or a send/recv whose peer never posted the other half. Members that wait in another
    group's op are victims; the others are where the group stops."""
    stops = [s for s in facts.group_stops if s.kind in FR_ABSENT]
    culprits = sorted({r for s in stops for r in s.culprits})
    if not culprits:
        return None
    first = next(s for s in stops if s.culprits)
    near = set(first.victims) | set(culprits)
    far = sorted({r for s in stops for r in s.victims} - near)
    victims = f"; {ranks_text(far)} wait in other groups' ops for them (victims)" if far else ""
    no_dump = sorted({r for s in stops for r in s.without_dump} & set(culprits))
    evidence = [e for s in stops[:3] for e in fr_evidence(facts, s)]
    settled = not any(s.pending for s in stops if s.culprits)
    who = ranks_text(culprits)
    died = f" ({ranks_text(no_dump)} left no dump: did it die?)" if no_dump else ""
    return Finding(
        "A",
        0.5 if settled else 0.7,
        f"{capitalised(who)} {_verb(culprits, 'is', 'are')} where the job stops (flight "
        f"recorder): {first.detail}{victims}.",
        suspects=tuple(culprits),
        evidence=tuple(evidence + quotes.stacks(facts, culprits, limit=3)),
        check=(
            f"py-spy dump, log tail and exit code of {ranks_text(culprits[:3])}{died}: where "
            f"they are instead of group {first.group.key}'s #{first.seq}."
        ),
        rule="fr_never_reached",
    )


def fr_behind(facts: Facts) -> Finding | None:
    """Every member issued the collective, but some have not completed (or started) what the
    others did: their device or their watchdog is behind. Weak: a dump taken a moment
    earlier looks the same."""
    stop = next((s for s in facts.group_stops if s.kind in ("not_completed", "not_started")), None)
    if stop is None or not stop.culprits:
        return None
    return Finding(
        "A",
        0.45,
        f"{capitalised(ranks_text(stop.culprits))} fell behind in the flight recorder: "
        f"{stop.detail}.",
        suspects=stop.culprits,
        evidence=tuple(fr_evidence(facts, stop) + quotes.stacks(facts, stop.culprits, limit=3)),
        check=(
            f"dmesg (NVRM Xid) and nvidia-smi on the nodes of {ranks_text(stop.culprits[:3])}, "
            "and a second dump: a device that never finishes what the others finished."
        ),
        rule="fr_behind",
    )


def fr_all_waiting(facts: Facts) -> Finding | None:
    """No stack to say so, but the flight recorder does: every member of a group issued the
    same collective and none completes it, nobody is missing: the meeting itself fails (C)."""
    if facts.in_collective or facts.outside:
        return None
    stop = next((s for s in facts.group_stops if s.kind == "all_waiting"), None)
    if stop is None:
        return None
    everyone = (
        "every rank" if stop.group.members_from != "entries" else "every rank that left a dump"
    )
    return Finding(
        "C",
        0.45,
        f"The ranks wait in the same collective (flight recorder): {stop.detail}. "
        f"{capitalised(everyone)} is there: the meeting itself fails (network, configuration).",
        evidence=tuple(fr_evidence(facts, stop)),
        check=(
            "NCCL_SOCKET_IFNAME / NCCL_IB_HCA and NCCL WARN lines on every node, and py-spy of "
            "every rank to confirm all are inside it."
        ),
        rule="fr_all_waiting",
    )


def _end_of_blame(blames) -> list[int]:
    """The named peers that name nobody themselves. A named rank that in turn reports another
    peer is a messenger, not the culprit: a monitored barrier's coordinator (rank 0) is blamed
    by every rank that talks to it when it gives up on the rank that never came, and says
    which one that was. Follow the chain to its end; if it only goes round (two ranks each
    naming the other), nothing tells them apart and every named rank stays."""
    named = {r for b in blames for r in b.peer_ranks}
    names_another = {
        b.reporter for b in blames if b.reporter is not None and set(b.peer_ranks) - {b.reporter}
    }
    ends = named - names_another
    return sorted(ends or named)


def peer_named(facts: Facts) -> Finding | None:
    """A rank's NCCL/gloo error names the peer it lost: the peer is the culprit, not the
    reporter (a rank reporting a peer's death is its victim)."""
    blames = [b for b in facts.peer_blames if b.peer_ranks or b.peer_node]
    if not blames:
        return None
    culprits = _end_of_blame(blames)
    nodes = sorted({b.peer_node for b in blames if b.peer_node})
    reporters = sorted({b.reporter for b in blames if b.reporter is not None} - set(culprits))
    evidence = [Quote(QuoteKind.NCCL_PEER, b.node, b.reporter, b.line) for b in blames[:4]]
    for rank in culprits[:3]:
        evidence += quotes.log_errors(facts, rank)
    who = ranks_text(culprits) if culprits else ", ".join(nodes)
    by = f" by {ranks_text(reporters)}" if reporters else ""
    return Finding(
        "A",
        0.75,
        f"{capitalised(who)} {'is' if len(culprits) == 1 else 'are'} named as the lost peer{by} "
        f"({blames[0].reason}){' on ' + ', '.join(nodes[:3]) if nodes and culprits else ''}. "
        "The reporters are victims; read the peer's log tail and its node's dmesg.",
        suspects=tuple(culprits),
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        check=(
            "The named peer's log tail and its node's dmesg: it died, or its link dropped, "
            "before the reporters' errors."
        ),
        rule="peer_named",
    )


def completed_past(facts: Facts) -> Finding | None:
    """A rank times out in collective #P while another rank of the group says it completed
    #P or later. A collective completes only when every rank of the group issued it, so the
    two ran something different at #P: their orders parted (B), not one rank late."""
    done = {int(r): c for r, c in ((facts.watchdog or {}).get("last_completed") or {}).items()}
    groups = {rec.pg for recs in facts.collectives.values() for rec in recs if rec.pg}
    if not done or len(groups) > 1:
        return None  # positions of different groups do not compare
    waiting = {}  # rank -> the oldest collective its watchdog reports stuck
    for rank, recs in facts.collectives.items():
        stuck = [r for r in recs if r.source == "watchdog" and r.seq is not None]
        if stuck:
            waiting[rank] = min(stuck, key=lambda r: r.seq)  # type: ignore[arg-type,return-value]
    past = {
        rank: (rec, other)
        for rank, rec in waiting.items()
        for other, completed in done.items()
        if other != rank and completed >= rec.seq  # type: ignore[operator]
    }
    if not past:
        return None
    rank, (rec, other) = min(past.items())
    theirs = waiting.get(other)
    evidence = [Quote(QuoteKind.COLLECTIVE, facts.rank_node.get(rank), rank, rec.line)]
    if theirs is not None:
        evidence.append(Quote(QuoteKind.COLLECTIVE, facts.rank_node.get(other), other, theirs.line))
    return Finding(
        "B",
        0.8,
        f"Rank {rank} waits in collective #{rec.seq} ({rec.op or 'its op'}) that rank {other} "
        f"reports completed (its last completed is #{done[other]}): a collective completes only "
        "when every rank issued it, so the two ran different collectives at that position and "
        "their orders parted. Look for a branch (a save, an evaluation, a rank-0-only step) "
        "that issues collectives on some ranks only.",
        evidence=tuple(evidence),
        check=(
            f"Flight-recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE) of ranks {rank} and {other}: "
            f"the collective each ran at #{rec.seq}."
        ),
        rule="completed_past",
    )


def lagging(facts: Facts) -> Finding | None:
    """A rank's last completed collective or step is behind its group's: it stopped first."""
    behind = _lagging(facts)
    if not behind:
        return None
    ranks = sorted(behind)
    evidence = [Quote(QuoteKind.WATCHDOG, facts.rank_node.get(r), r, behind[r]) for r in ranks[:5]]
    return Finding(
        "A",
        0.6,
        f"{capitalised(ranks_text(ranks))} fell behind: their last completed collective or step "
        "is older than the others'; read their log tails.",
        suspects=tuple(ranks),
        evidence=tuple(e for e in evidence if e.text),
        check=(
            f"The log tails of {ranks_text(ranks[:3])} around their last completed step: what "
            "they did instead of the next collective."
        ),
        rule="lagging",
    )


def _lagging(facts: Facts) -> dict[int, str]:
    """rank -> a line naming it behind: watchdog positions, desync reports, logged steps."""
    behind = dict(lagging_in_group(facts.collectives))
    watchdog = facts.watchdog or {}
    lagging = watchdog.get("lagging_ranks") or []
    if lagging:  # a rank's last watchdog line (a fleet's: 64,000 lines, read when wanted)
        lines = {r: f.line for _, r, f in facts.snap.watchdog if r is not None}
        for rank in lagging:
            behind.setdefault(rank, lines.get(rank, ""))
    for _, log in facts.snap.logs_of_note:
        for fact in log.desync:
            if fact.rank in log.lagging:
                behind.setdefault(fact.rank, fact.line)
    if not facts.snap.has_process_evidence:
        behind.update({r: t for r, t in _behind_in_logs(facts).items() if r not in behind})
    behind.update({r: t for r, t in facts.quiet.items() if r not in behind})
    return behind


def _behind_in_logs(facts: Facts) -> dict[int, str]:
    """Logs only: a rank whose last step is behind the others', or whose watchdog stayed
    silent while most ranks' fired (it was not waiting in that collective)."""
    behind: dict[int, str] = {}
    steps = {r: s.last_step for r, s in facts.ranks.items() if s.last_step is not None}
    top = max(steps.values(), default=None)
    for rank, step in steps.items():
        if top is not None and step < top:
            behind[rank] = f"rank {rank}: last step {step}, others reached {top}"
    reporting = {rank for _, rank, _ in facts.snap.watchdog if rank is not None}
    stuck = (facts.watchdog or {}).get("stuck_collective") or {}
    if steps and len(reporting) >= len(steps) / 2:
        for rank in sorted(set(steps) - reporting):
            behind.setdefault(
                rank,
                f"rank {rank}: no watchdog timeout while {ranks_text(reporting)} timed out in "
                f"collective #{stuck.get('seq')}; its last step was {steps[rank]}",
            )
    return behind
