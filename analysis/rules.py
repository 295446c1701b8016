"""The diagnosis as an ordered list of small pure rules over Facts.

Each rule looks at the facts and either concludes (a Verdict with its class, suspects,
confidence and the lines it rests on) or stays silent (None). The first rule that speaks wins,
so the order encodes precedence: proof of progress first, then ranks that provably left, then
the rendezvous, then disagreements between ranks (B), ranks outside the collective (A), peers
named by NCCL, and configuration (C) last, when everyone came to the same meeting.

Rules of thumb (docs/domain.md): same stack everywhere + a rank absent -> A; different collectives
-> B; same collective + all present -> C; progressing with one rank slow -> straggler; no step
ever completed and ranks in init_process_group -> init.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from analysis import quotes
from analysis.envdiff import minority_ranks
from analysis.facts import Facts
from analysis.groups import disagreements, lagging_in_group
from analysis.stacks import base_name
from analysis.verdict import SECOND_SNAPSHOT, Evidence, Verdict, capitalised, ranks_text

RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT")
# A straggler is a few slow ranks; when half the job is "slow", the job is just slow.
STRAGGLER_SHARE = 8
STRAGGLER_FACTOR = 1.5
SLOW_REPORTS_NEEDED = 2

Rule = Callable[[Facts], Verdict | None]


def _stuck(facts: Facts) -> tuple[float, str, tuple[str, ...]]:
    """How sure "stuck" is: proven (no step for too long, nothing moved) or merely assumed."""
    if facts.progress.progressing is False:
        return 1.0, "", ()
    return 0.8, " (one look, nothing proves it stuck: slow or dead?)", (SECOND_SNAPSHOT,)


def _verdict(facts: Facts, classification: str, confidence: float, summary: str, **kw) -> Verdict:
    damp, hint, first_steps = _stuck(facts)
    return Verdict(
        classification,
        round(confidence * damp, 2),
        summary + hint,
        next_steps=first_steps + tuple(kw.pop("next_steps", ())),
        **kw,
    )


def _step_text(facts: Facts, ranks) -> str:
    step = facts.step_of(ranks)
    return f" after step {step}" if step is not None else ""


# ------------------------------------------------------------------ rules


def no_evidence(facts: Facts) -> Verdict | None:
    if facts.ranks or facts.snap.logs or facts.missing or facts.snap.dumps:
        return None
    return Verdict(
        "unknown",
        0.0,
        "No rank, stack, log or flight-recorder dump was found in this snapshot.",
        rule="none",
    )


def moving(facts: Facts) -> Verdict | None:
    """Proof of progress and nobody gone: healthy, or one rank slower than the rest."""
    if not facts.progress.progressing or facts.missing:
        return None
    slow = _stragglers(facts)
    if slow and len(slow) <= max(1, facts.world // STRAGGLER_SHARE):
        return _straggler(facts, slow)
    real = [d for d in facts.env_diffs if not d["expected_per_rank"]]
    note = ""
    evidence = [quotes.progress(facts.progress)]
    if real:
        note = f" Environment differs across ranks ({real[0]['name']}): fix it before it bites."
        evidence += [Evidence("env_diff", None, None, quotes.diff_text(d)) for d in real[:3]]
    two = facts.progress.method == "two_snapshots"
    return Verdict(
        "healthy",
        0.85 if two else 0.6,
        f"Training progresses ({facts.progress.describe()}); no rank is stuck.{note}",
        evidence=tuple(evidence),
        rule="moving",
    )


def _outside_every_look(facts: Facts) -> list[int]:
    """The ranks outside any collective in every snapshot, when in one of them the others
    waited in a collective. A straggler is slow every time we look, and one snapshot may
    catch a fast rank busy, or (on a loaded machine, py-spy taking its time) every rank in
    its data loading at once: that look then names no one, and does not clear anyone."""
    looks = [facts.ranks] + ([facts.prev.ranks] if facts.prev is not None else [])
    if not any(s.frame_kind == "collective" for ranks in looks for s in ranks.values()):
        return []
    outside = [{r for r, s in ranks.items() if s.frame_kind == "outside"} for ranks in looks]
    return sorted(set.intersection(*outside))


def _stragglers(facts: Facts) -> list[int]:
    outside = _outside_every_look(facts)
    if outside:
        return outside
    named = [r for r, (count, _) in facts.slow_reports.items() if count >= SLOW_REPORTS_NEEDED]
    if named:
        return sorted(named)
    times = sorted((s.step_time, r) for r, s in facts.ranks.items() if s.step_time)
    if len(times) < 3:
        return []
    median = times[len(times) // 2][0]
    return sorted(r for t, r in times if median > 0 and t > STRAGGLER_FACTOR * median)


def _straggler(facts: Facts, slow: list[int]) -> Verdict:
    evidence = quotes.stacks(facts, slow)
    for rank in slow[:5]:
        lines = facts.slow_reports.get(rank, (0, ()))[1][:2]
        evidence += [Evidence("slow_rank", facts.rank_node.get(rank), rank, x) for x in lines]
        state = facts.ranks.get(rank)
        if state and state.step_time and not lines:
            text = f"rank {rank}: {state.step_time:g} s per step"
            evidence.append(Evidence("step_time", state.node, rank, text))
    evidence.append(quotes.progress(facts.progress))
    state = facts.ranks.get(slow[0])
    frame = (state.innermost_frame if state else "") or "a slow step"
    waiting = facts.in_collective
    nodes = sorted({facts.rank_node[r] for r in slow if r in facts.rank_node})
    who = f"; {ranks_text(waiting)} wait in collectives" if waiting else ""
    where = f" Look at {', '.join(nodes[:5])}:" if nodes else " Look at its node:"
    return Verdict(
        "straggler",
        0.75 if facts.progress.method == "two_snapshots" else 0.55,
        f"The job still progresses ({facts.progress.describe()}) but {ranks_text(slow)} "
        f"{'is' if len(slow) == 1 else 'are'} slow: busy in {frame}{who}.{where} data, CPU, "
        "disk, throttling.",
        suspects=tuple(slow),
        evidence=tuple(evidence),
        rule="straggler",
    )


def departed(facts: Facts) -> Verdict | None:
    """A rank left on positive evidence (launcher exit, OOM kill, zombie): A, however early.
    A job process that died where no rank can be named points at its node."""
    decisive = [r for r in facts.missing if _left_for_sure(facts, r)]
    if decisive:
        return _lost(facts, sorted(set(facts.missing)), rule="departed")
    if not facts.node_exits:
        return None
    nodes = sorted({node for node, _ in facts.node_exits})
    evidence = [Evidence("exit_code", node, None, line) for node, line in facts.node_exits[:4]]
    gone = [r for r in facts.missing if r in facts.departures]
    evidence += [Evidence("exit_code", facts.node_of(r), r, facts.departures[r].line) for r in gone]
    then = f"; {ranks_text(gone)} left with it" if gone else ""
    return _verdict(
        facts,
        "A",
        0.6,
        f"A process of the job died on {', '.join(nodes[:5])} ({facts.node_exits[0][1][:120]})"
        f"{then}. The launcher's line names no rank: read that node's logs and dmesg to find "
        "which rank failed first.",
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        rule="departed",
    )


def _left_for_sure(facts: Facts, rank: int) -> bool:
    """An exit code of its own (not the launcher stopping it) or an OOM kill of its pid; a
    launcher that only says it killed the rank does not say the rank failed first."""
    gone = facts.departures.get(rank)
    if gone is not None and not gone.stopped_by_launcher and gone.exit_code is not None:
        return True
    pid = facts.known_pid(rank)
    return pid is not None and pid in facts.oom_by_pid


def init(facts: Facts) -> Verdict | None:
    """Nobody ever finished a step and ranks sit in the rendezvous."""
    majority_init = facts.in_init and len(facts.in_init) > facts.with_stack / 2
    never_started = (
        not _training_started(facts)
        and not facts.in_collective
        and (facts.snap.has_process_evidence or facts.in_init or facts.rendezvous_errors)
        and (facts.ranks or facts.missing or facts.rendezvous_errors)
    )
    if not (majority_init or never_started):
        return None
    waiting = list(facts.in_init)
    lost = list(facts.missing)
    suspects, evidence = list(lost), quotes.stacks(facts, waiting, limit=2)
    evidence += [Evidence("rendezvous", n, None, line) for n, line in facts.rendezvous_errors]
    if not lost:
        # Everyone came but to different places: the ranks pointed at another rendezvous.
        for diff in facts.env_diffs:
            if diff["name"] in RENDEZVOUS_VARIABLES:
                odd = sorted(minority_ranks(diff, facts.snap.env, facts.rank_node))
                suspects += odd
                rank = odd[0] if len(odd) == 1 else None
                evidence.append(Evidence("env_diff", None, rank, quotes.diff_text(diff)))
    for rank in lost[:10]:
        evidence += quotes.departure(facts, rank)[0]
    master = {facts.snap.env[r].get("MASTER_ADDR") for r in facts.snap.env} - {None}
    where = f" (MASTER_ADDR {', '.join(sorted(master))})" if master else ""
    if lost:
        who = f"{ranks_text(lost)} never joined"
    elif suspects:
        who = f"{ranks_text(suspects)} point at a different rendezvous"
    else:
        who = "all ranks are present, so the rendezvous itself is failing"
    # No step ever completed: "slow or dead?" does not arise, nothing to damp.
    return Verdict(
        "init",
        0.85 if waiting else 0.6,
        f"Stuck at initialisation: {ranks_text(waiting) if waiting else 'no rank'} wait in "
        f"init_process_group and no step completed; {who}. Check MASTER_ADDR/MASTER_PORT"
        f"{where}, DNS, firewall and the launcher.",
        suspects=tuple(sorted(set(suspects))),
        evidence=tuple(evidence),
        rule="init",
    )


def _training_started(facts: Facts) -> bool:
    if facts.any_step:
        return True
    if any(e.completed for d in facts.snap.dumps for e in d.entries):
        return True
    return any((f.last_completed or 0) > 0 or (f.seq or 0) > 1 for _, _, f in facts.snap.watchdog)


def lost(facts: Facts) -> Verdict | None:
    """Ranks gone from a node that was looked at (no exit line): A."""
    if not facts.missing:
        return None
    return _lost(facts, list(facts.missing), rule="lost")


# Failures this close to the first are one event; later ones are its consequences (torchrun
# stops the others with SIGTERM, then SIGKILL 30 s later).
SAME_FAILURE_S = 5.0


def _first_leaver(facts: Facts, lost_ranks: list[int]) -> int:
    for rank in lost_ranks:
        pid = facts.known_pid(rank)
        if pid is not None and pid in facts.oom_by_pid:
            return rank
    timed = _culprits_by_time(facts, lost_ranks)
    if timed:
        return timed[0]
    for rank in lost_ranks:
        gone = facts.departures.get(rank)
        if gone is not None and not gone.stopped_by_launcher:
            return rank
    return lost_ranks[0]


def _culprits_by_time(facts: Facts, lost_ranks: list[int]) -> list[int]:
    """When the launchers say when each rank failed, the first failures, earliest first
    (a "Root Cause" block is only what its own agent saw first)."""
    timed = [
        (gone.at, rank)
        for rank in lost_ranks
        if (gone := facts.departures.get(rank)) and gone.at and not gone.stopped_by_launcher
    ]
    if not timed:
        return []
    first = min(timed)[0]
    return [rank for at, rank in sorted(timed) if (at - first).total_seconds() <= SAME_FAILURE_S]


def _lost(facts: Facts, lost_ranks: list[int], rule: str) -> Verdict:
    first = _first_leaver(facts, lost_ranks)
    ordered = [first, *[r for r in lost_ranks if r != first]]
    # Ranks the launcher stopped after another rank failed are victims, not suspects; so are
    # ranks that failed well after the first one.
    culprits = _culprits_by_time(facts, ordered) or [
        r
        for r in ordered
        if r not in facts.departures or not facts.departures[r].stopped_by_launcher
    ]
    evidence: list[Evidence] = []
    strong = False
    for rank in ordered[:10]:
        quoted, decisive = quotes.departure(facts, rank)
        evidence += quoted
        strong = strong or decisive
    # The flight recorder's word on where the groups stop, victims aside.
    culprit_set = set(culprits or ordered)
    stops = [s for s in facts.group_stops if set(s.culprits) & culprit_set]
    evidence += [quotes.flight_recorder(s.mismatch) for s in stops[:2]]
    waiting = list(facts.in_collective)
    if waiting:
        evidence += quotes.stack(facts, waiting[0])
    op = facts.main_op()
    node = facts.node_of(first)
    rest = f"; {ranks_text(waiting)} wait in {op}" if waiting and op else ""
    more = f" (missing or exited: {', '.join(map(str, lost_ranks))})" if len(lost_ranks) > 1 else ""
    where = f" on {node}" if node else ""
    return _verdict(
        facts,
        "A",
        0.95 if strong else 0.8 if waiting else 0.65,
        f"Rank {first} did not come: {quotes.why_lost(facts, first)}{where}{more}{rest}"
        f"{_step_text(facts, waiting or list(facts.ranks))}. "
        f"Read rank {first}'s log tail and {node or 'its node'}'s dmesg.",
        suspects=tuple(culprits or ordered),
        suspect_nodes=tuple(sorted({facts.oom_by_pid[p][0] for p in _pids(facts, ordered)})),
        evidence=tuple(evidence),
        rule=rule,
    )


def _pids(facts: Facts, ranks) -> list[int]:
    pids = (facts.known_pid(r) for r in ranks)
    return [p for p in pids if p is not None and p in facts.oom_by_pid]


def unreachable(facts: Facts) -> Verdict | None:
    """Nodes that gave nothing while the others wait: their ranks are unobserved, the node is
    the place to look (a lost node looks exactly like this)."""
    silent = sorted(n for n, f in facts.nodes.items() if f.status != "ok")
    if not silent or not (facts.in_collective or facts.unobserved):
        return None
    evidence = [Evidence("node_unreachable", n, None, facts.nodes[n].status) for n in silent[:5]]
    waiting = list(facts.in_collective)
    if waiting:
        evidence += quotes.stack(facts, waiting[0])
    unseen = f"; {ranks_text(facts.unobserved)} unobserved" if facts.unobserved else ""
    rest = f"; {ranks_text(waiting)} wait in {facts.main_op()}" if waiting else ""
    return _verdict(
        facts,
        "A",
        0.6,
        f"{', '.join(silent[:5])} gave no evidence ({facts.nodes[silent[0]].status}){unseen}"
        f"{rest}. Is the node alive? Check it and its ranks directly.",
        suspect_nodes=tuple(silent),
        evidence=tuple(evidence),
        rule="unreachable",
    )


def fr_different_collective(facts: Facts) -> Verdict | None:
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
    return _verdict(
        facts,
        "B",
        0.9 if culprits else 0.75,
        f"Ranks run different collectives (flight recorder): {stop.detail}. {who}",
        suspects=tuple(culprits),
        evidence=(*_fr_evidence(facts, stop), *quotes.stacks(facts, culprits, limit=3)),
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


def _verb(ranks, one: str, many: str) -> str:
    return one if len(ranks) == 1 else many


def _culprits_frame(stop) -> str:
    sides = [side for side in stop.sides if set(side.ranks) & set(stop.culprits)]
    return (sides or stop.sides[-1:] or [None])[0].frame if stop.sides else ""


def _fr_evidence(facts: Facts, stop) -> list[Evidence]:
    """The stop and the lines behind it, each tied to the rank it is about."""
    node = facts.rank_node.get
    evidence = [Evidence("flight_recorder", None, None, stop.detail)]
    for line in stop.lines:
        head = line.split(":", 1)[0]
        rank = int(head[5:]) if head.startswith("rank ") and head[5:].isdigit() else None
        evidence.append(
            Evidence("flight_recorder", node(rank) if rank is not None else None, rank, line)
        )
    return evidence


def detail_mismatch(facts: Facts) -> Verdict | None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL compared the ranks' fingerprints and found them
    different: B, even when ranks then exited (the mismatch error is why they exited)."""
    return _logs_disagree(facts, frozenset({"detail"}), "detail_mismatch")


def logs_different_collective(facts: Facts) -> Verdict | None:
    """Watchdog lines: at one group's sequence number, ranks report another op or size than
    their peers (the classic type B read from `kubectl logs`)."""
    return _logs_disagree(facts, frozenset({"watchdog", "detail"}), "logs_different_collective")


def _logs_disagree(facts: Facts, sources: frozenset[str], rule: str) -> Verdict | None:
    found = disagreements(facts.collectives, sources, frozenset(facts.departures))
    if not found:
        return None
    first = found[0]
    group = f" of group {first.pg}" if first.pg else ""
    odd = first.minority or tuple(r for r in first.majority if first.lines)
    evidence = [Evidence("collective", None, None, line) for line in first.lines]
    for rank in first.majority[:1] if first.minority else ():
        evidence += [
            Evidence("collective", None, rank, r.line) for r in facts.collectives[rank][:1]
        ]
    if first.minority:
        evidence = [Evidence(e.kind, e.node, first.minority[0], e.text) for e in evidence[:1]] + (
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
    return _verdict(
        facts,
        "B",
        0.85 if first.minority else 0.7,
        f"At collective #{first.seq}{group}, {what}: the ranks left the same order.{where}",
        suspects=first.minority,
        evidence=tuple(evidence),
        rule=rule,
    )


def outside_collective(facts: Facts) -> Verdict | None:
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
    return _verdict(
        facts,
        "A",
        0.9 if agrees else 0.8,
        f"{capitalised(ranks_text(outside))} did not come: alive but stuck outside any "
        f"collective in {state.innermost_frame}, while {ranks_text(waiting)} wait in "
        f"{facts.main_op()}{_step_text(facts, waiting)}. Look at {', '.join(nodes[:5])}: data "
        "loading, I/O, locks.",
        suspects=tuple(outside),
        evidence=tuple(evidence),
        rule="outside_collective",
    )


def stacks_different_collective(facts: Facts) -> Verdict | None:
    mismatch_lines = [f for _, log in facts.snap.logs for f in log.mismatches]
    if len(facts.ops) < 2 and not mismatch_lines:
        return None
    by_op: dict[str, list[int]] = defaultdict(list)
    for rank in facts.in_collective:
        by_op[base_name(facts.ranks[rank].frame_name)].append(rank)
    ordered = sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    minority = [r for _, ranks in ordered[1:] for r in ranks]
    evidence = [Evidence("log_error", None, f.rank, f.line) for f in mismatch_lines[:3]]
    evidence += quotes.stacks(facts, minority, limit=3)
    if ordered:
        evidence += quotes.stack(facts, ordered[0][1][0])
    parts = "; ".join(f"{ranks_text(r)} in {op}" for op, r in ordered[:3])
    return _verdict(
        facts,
        "B",
        0.8 if len(ordered) > 1 else 0.7,
        f"Ranks are in different collectives: {parts or 'see mismatch report'}. "
        f"Look for a rank-dependent branch near {quotes.frame_of(facts, minority)}.",
        suspects=tuple(minority),
        evidence=tuple(evidence),
        rule="stacks_different_collective",
    )


def different_call_sites(facts: Facts) -> Verdict | None:
    if len(facts.signatures) < 2:
        return None
    by_sig: dict[str, list[int]] = defaultdict(list)
    for rank in facts.in_collective:
        by_sig[facts.ranks[rank].stack_signature].append(rank)
    ordered = sorted(by_sig.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    minority = [r for _, ranks in ordered[1:] for r in ranks]
    op = facts.main_op()
    return _verdict(
        facts,
        "B",
        0.55,
        f"All ranks are in {op} but from different call sites: {ranks_text(minority)} "
        f"call it elsewhere than {ranks_text(ordered[0][1])}. "
        "Compare the stacks: a rank-dependent branch?",
        suspects=tuple(minority),
        evidence=tuple(quotes.stacks(facts, [ordered[0][1][0], *minority[:3]])),
        rule="different_call_sites",
    )


def fr_never_reached(facts: Facts) -> Verdict | None:
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
    evidence = [e for s in stops[:3] for e in _fr_evidence(facts, s)]
    settled = not any(s.pending for s in stops if s.culprits)
    who = ranks_text(culprits)
    look = f"Read {who}'s log tail, exit code and node's dmesg" + (
        f" ({ranks_text(no_dump)} left no dump: did it die?)" if no_dump else ""
    )
    return _verdict(
        facts,
        "A",
        0.5 if settled else 0.7,
        f"{capitalised(who)} {_verb(culprits, 'is', 'are')} where the job stops (flight "
        f"recorder): {first.detail}{victims}.",
        suspects=tuple(culprits),
        evidence=tuple(evidence + quotes.stacks(facts, culprits, limit=3)),
        next_steps=(look + ".",),
        rule="fr_never_reached",
    )


def fr_behind(facts: Facts) -> Verdict | None:
    """Every member issued the collective, but some have not completed (or started) what the
    others did: their device or their watchdog is behind. Weak: a dump taken a moment
    earlier looks the same."""
    stop = next((s for s in facts.group_stops if s.kind in ("not_completed", "not_started")), None)
    if stop is None or not stop.culprits:
        return None
    return _verdict(
        facts,
        "A",
        0.5,
        f"{capitalised(ranks_text(stop.culprits))} fell behind in the flight recorder: "
        f"{stop.detail}. Look at their devices (dmesg, Xid) and stacks.",
        suspects=stop.culprits,
        evidence=tuple(_fr_evidence(facts, stop) + quotes.stacks(facts, stop.culprits, limit=3)),
        rule="fr_behind",
    )


def fr_all_waiting(facts: Facts) -> Verdict | None:
    """No stack to say so, but the flight recorder does: every member of a group issued the
    same collective and none completes it, nobody is missing: the meeting itself fails (C)."""
    if facts.in_collective or facts.outside:
        return None
    stop = next((s for s in facts.group_stops if s.kind == "all_waiting"), None)
    if stop is None:
        return None
    return _verdict(
        facts,
        "C",
        0.5,
        f"All ranks are present and wait in the same collective (flight recorder): "
        f"{stop.detail}. Look at the network and configuration: NCCL_SOCKET_IFNAME, IB links, "
        "NCCL WARN lines, and collect stacks to confirm.",
        evidence=tuple(_fr_evidence(facts, stop)),
        rule="fr_all_waiting",
    )


def peer_named(facts: Facts) -> Verdict | None:
    """A rank's NCCL/gloo error names the peer it lost: the peer is the culprit, not the
    reporter (a rank reporting a peer's death is its victim)."""
    blames = [b for b in facts.peer_blames if b.peer_ranks or b.peer_node]
    if not blames:
        return None
    culprits = sorted({r for b in blames for r in b.peer_ranks})
    nodes = sorted({b.peer_node for b in blames if b.peer_node})
    reporters = sorted({b.reporter for b in blames if b.reporter is not None} - set(culprits))
    evidence = [Evidence("nccl_peer", b.node, b.reporter, b.line) for b in blames[:4]]
    for rank in culprits[:3]:
        evidence += quotes.log_errors(facts, rank)
    who = ranks_text(culprits) if culprits else ", ".join(nodes)
    by = f" by {ranks_text(reporters)}" if reporters else ""
    return _verdict(
        facts,
        "A",
        0.75,
        f"{capitalised(who)} {'is' if len(culprits) == 1 else 'are'} named as the lost peer{by} "
        f"({blames[0].reason}){' on ' + ', '.join(nodes[:3]) if nodes and culprits else ''}. "
        "The reporters are victims; read the peer's log tail and its node's dmesg.",
        suspects=tuple(culprits),
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        rule="peer_named",
    )


def lagging(facts: Facts) -> Verdict | None:
    """A rank's last completed collective or step is behind its group's: it stopped first."""
    behind = _lagging(facts)
    if not behind:
        return None
    ranks = sorted(behind)
    evidence = [Evidence("watchdog", facts.rank_node.get(r), r, behind[r]) for r in ranks[:5]]
    return _verdict(
        facts,
        "A",
        0.6,
        f"{capitalised(ranks_text(ranks))} fell behind: their last completed collective or step "
        "is older than the others'; read their log tails.",
        suspects=tuple(ranks),
        evidence=tuple(e for e in evidence if e.text),
        rule="lagging",
    )


def _lagging(facts: Facts) -> dict[int, str]:
    """rank -> a line naming it behind: watchdog positions, desync reports, logged steps."""
    behind = dict(lagging_in_group(facts.collectives))
    watchdog = facts.watchdog or {}
    lines = {r: f.line for _, r, f in facts.snap.watchdog if r is not None}
    for rank in watchdog.get("lagging_ranks") or []:
        behind.setdefault(rank, lines.get(rank, ""))
    for _, log in facts.snap.logs:
        for fact in log.desync:
            if fact.rank in log.lagging:
                behind.setdefault(fact.rank, fact.line)
    if not facts.snap.has_process_evidence:
        behind.update({r: t for r, t in _behind_in_logs(facts).items() if r not in behind})
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


def nccl_config_differs(facts: Facts) -> Verdict | None:
    """NCCL itself reports another version, net plugin or transport on a minority of nodes."""
    odd = [d for d in facts.nccl_diffs if d["minority_nodes"]]
    if not odd or facts.outside:
        return None
    suspects = sorted({r for d in odd for r in d["minority_ranks"]})
    nodes = sorted({n for d in odd for n in d["minority_nodes"]})
    evidence = [Evidence("nccl_config", None, None, quotes.diff_text(d)) for d in odd[:4]]
    evidence += [
        Evidence("nccl_config", n, None, line)
        for d in odd[:2]
        for n, line in zip(d["minority_nodes"], d["lines"], strict=False)
    ]
    names = ", ".join(d["name"] for d in odd[:3])
    return _verdict(
        facts,
        "C",
        0.7,
        f"NCCL reports a different configuration ({names}) on {', '.join(nodes[:5])} than on "
        f"the other nodes{'; ' + ranks_text(suspects) + ' run there' if suspects else ''}. "
        "Align the NCCL version, net plugin and transport across nodes.",
        suspects=tuple(suspects),
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        rule="nccl_config_differs",
    )


def same_collective(facts: Facts) -> Verdict | None:
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
        evidence.append(Evidence("env_diff", None, rank, quotes.diff_text(diff)))
        found.append(diff["name"])
    for item in facts.shell:
        nodes.add(item["node"])
        found.append(f"{item['name']} in {item['path']} on {item['node']}")
    for diff in facts.nccl_diffs:
        suspects.update(diff["minority_ranks"])
        nodes.update(diff["minority_nodes"])
        evidence.append(Evidence("nccl_config", None, None, quotes.diff_text(diff)))
        found.append(f"NCCL {diff['name']}")
    fatal = [(n, x) for n, f in sorted(facts.nodes.items()) for x in f.kernel.xids if x.fatal]
    found += [f"Xid {xid.xid} on {node}" for node, xid in fatal]
    for _, log in facts.snap.logs:
        evidence += [Evidence("nccl_warn", None, f.rank, f.line) for f in log.nccl_warn[-2:]]
    lead = (
        f"All {len(waiting)} ranks are present and wait in the same {facts.main_op()}"
        f"{_step_text(facts, waiting)}; nobody is missing."
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
    return _verdict(
        facts,
        "C",
        confidence,
        summary,
        suspects=tuple(sorted(suspects)),
        suspect_nodes=tuple(sorted(nodes)),
        evidence=tuple(evidence),
        rule="same_collective",
    )


def cpu_side(facts: Facts) -> Verdict | None:
    if not facts.outside or facts.in_collective:
        return None
    outside = list(facts.outside)
    return _verdict(
        facts,
        "A",
        0.4,
        f"No rank is inside a collective: {ranks_text(outside)} are stuck on the CPU side "
        f"({facts.ranks[outside[0]].innermost_frame}). Look at data loading, I/O and locks.",
        suspects=tuple(outside),
        evidence=tuple(quotes.stacks(facts, outside)),
        rule="cpu_side",
    )


def watchdog_only(facts: Facts) -> Verdict | None:
    """Logs only, every reporting rank timed out in the same collective and none lags: the
    logs name the stuck collective but cannot tell A from B from C."""
    stuck = (facts.watchdog or {}).get("stuck_collective")
    if not stuck or facts.snap.has_process_evidence:
        return None
    evidence = [Evidence("watchdog", n, r, f.line) for n, r, f in facts.snap.watchdog[:5]]
    return Verdict(
        "unknown",
        0.35,
        f"Logs only: the watchdog reports collective #{stuck['seq']} "
        f"({stuck['op'] or 'op unknown'}) timed out and no rank lags in the logs. The logs "
        "cannot tell a rank stalled inside it from a configuration problem: collect stacks "
        "(py-spy) of every rank and the flight recorder.",
        evidence=tuple(evidence),
        next_steps=(
            "Snapshot the cluster (py-spy of every rank, dmesg, flight recorder) to tell A, B "
            "and C apart.",
            SECOND_SNAPSHOT,
        ),
        rule="watchdog_only",
    )


def undecided(facts: Facts) -> Verdict:
    return Verdict(
        "unknown",
        0.2,
        "Not enough evidence to classify: no stack, flight-recorder or watchdog evidence decides.",
        next_steps=(SECOND_SNAPSHOT,),
        rule="undecided",
    )


RULES: tuple[Rule, ...] = (
    no_evidence,
    moving,
    detail_mismatch,
    departed,
    init,
    lost,
    unreachable,
    fr_different_collective,
    logs_different_collective,
    outside_collective,
    stacks_different_collective,
    different_call_sites,
    fr_never_reached,
    peer_named,
    fr_behind,
    lagging,
    nccl_config_differs,
    same_collective,
    fr_all_waiting,
    cpu_side,
    watchdog_only,
)


def first_verdict(facts: Facts, rules: tuple[Rule, ...] = RULES) -> Verdict:
    for rule in rules:
        verdict = rule(facts)
        if verdict is not None:
            return verdict
    return undecided(facts)
