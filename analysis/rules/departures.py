"""Ranks that left or never came: exits, kills, a rendezvous never met, silent nodes (A, init)."""

from __future__ import annotations

from analysis import quotes
from analysis.envdiff import minority_ranks
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.rules.base import step_text
from analysis.verdict import Quote, QuoteKind, capitalised, ranks_text

RENDEZVOUS_VARIABLES = ("MASTER_ADDR", "MASTER_PORT")


def departed(facts: Facts) -> Finding | None:
    """A rank left on positive evidence (launcher exit, OOM kill, zombie): A, however early.
    A job process that died where no rank can be named points at its node."""
    decisive = [r for r in facts.missing if _left_for_sure(facts, r)]
    if decisive:
        return _lost(facts, sorted(set(facts.missing)), rule="departed")
    if not facts.node_exits:
        return None
    nodes = sorted({node for node, _ in facts.node_exits})
    evidence = [Quote(QuoteKind.EXIT_CODE, node, None, line) for node, line in facts.node_exits[:4]]
    gone = [r for r in facts.missing if r in facts.departures]
    evidence += [
        Quote(QuoteKind.EXIT_CODE, facts.node_of(r), r, facts.departures[r].line) for r in gone
    ]
    then = f"; {ranks_text(gone)} left with it" if gone else ""
    return Finding(
        "A",
        0.6,
        f"A process of the job died on {', '.join(nodes[:5])} ({facts.node_exits[0][1][:120]})"
        f"{then}. The launcher's line names no rank: read that node's logs and dmesg to find "
        "which rank failed first.",
        suspect_nodes=tuple(nodes),
        evidence=tuple(evidence),
        check=(
            f"Read the log tail of the process that died on {nodes[0]} and that node's dmesg (OOM "
            "killer, Xid, segfault): the first error there is the cause."
        ),
        rule="departed",
    )


def _left_for_sure(facts: Facts, rank: int) -> bool:
    """An exit code of its own (not the launcher stopping it) or an OOM kill of its pid; a
    launcher that only says it killed the rank does not say the rank failed first."""
    gone = facts.departures.get(rank)
    if gone is not None and not gone.stopped_by_launcher and (gone.exit_code or gone.cause):
        return True
    pid = facts.known_pid(rank)
    return pid is not None and pid in facts.oom_by_pid


def init(facts: Facts) -> Finding | None:
    """Nobody ever finished a step and ranks sit in the rendezvous."""
    majority_init = facts.in_init and len(facts.in_init) > facts.with_stack / 2
    setting_up = _setting_up(facts)
    never_started = (
        not _training_started(facts)
        and not facts.in_collective
        and (
            facts.snap.has_process_evidence
            or facts.in_init
            or facts.rendezvous_errors
            or setting_up
        )
        and (facts.ranks or facts.missing or facts.rendezvous_errors or setting_up)
    )
    if not (majority_init or never_started):
        return None
    waiting = list(facts.in_init)
    lost = list(facts.missing)
    suspects, evidence = list(lost), quotes.stacks(facts, waiting, limit=2)
    evidence += [Quote(QuoteKind.RENDEZVOUS, n, None, line) for n, line in facts.rendezvous_errors]
    evidence += [
        Quote(QuoteKind.COMM_INIT, n, r, line) for r, (n, line) in sorted(setting_up.items())
    ]
    if not lost:
        # Everyone came but to different places: the ranks pointed at another rendezvous.
        for diff in facts.env_diffs:
            if diff["name"] in RENDEZVOUS_VARIABLES:
                odd = sorted(minority_ranks(diff, facts.snap.env, facts.rank_node))
                suspects += odd
                rank = odd[0] if len(odd) == 1 else None
                evidence.append(Quote(QuoteKind.ENV_DIFF, None, rank, quotes.diff_text(diff)))
    for rank in lost[:10]:
        evidence += quotes.departure(facts, rank)[0]
    master = {facts.snap.env[r].get("MASTER_ADDR") for r in facts.snap.env} - {None}
    where = f" (MASTER_ADDR {', '.join(sorted(master))})" if master else ""
    if lost:
        who = f"{ranks_text(lost)} never joined"
    elif suspects:
        who = f"{ranks_text(suspects)} point at a different rendezvous"
    elif setting_up:
        who = (
            f"{ranks_text(sorted(setting_up))} still {'sets' if len(setting_up) == 1 else 'set'}"
            " up its NCCL communicator (Init START, no COMPLETE) while others wait: start-up is "
            "slow or stuck on those ranks"
        )
    else:
        who = "all ranks are present, so the rendezvous itself is failing"
    # No step ever completed: "slow or dead?" does not arise, nothing to damp.
    return Finding(
        "init",
        0.85 if waiting else 0.6,
        f"Stuck at initialisation: {ranks_text(waiting) if waiting else 'no rank'} wait in "
        f"init_process_group and no step completed; {who}. Check MASTER_ADDR/MASTER_PORT"
        f"{where}, DNS, firewall and the launcher.",
        suspects=tuple(sorted(set(suspects))),
        evidence=tuple(evidence),
        check=(
            "From a waiting rank's node: `nc -vz MASTER_ADDR MASTER_PORT` (and DNS for "
            "MASTER_ADDR); the store must answer, and every rank must name the same one."
        ),
        rule="init",
    )


def _setting_up(facts: Facts) -> dict[int, tuple[str, str]]:
    """Ranks whose NCCL communicator set-up began (`- Init START`) and never completed in
    their lines: rank -> (node, the START line)."""
    started: dict[int, tuple[str, str]] = {}
    done: set[int] = set()
    for node, fact in facts.snap.comm_inits:
        if " - Init COMPLETE" in fact.line:
            done.add(fact.rank)
        elif " - Init START" in fact.line:
            started.setdefault(fact.rank, (node, fact.line))
    return {r: where for r, where in started.items() if r not in done}


def _training_started(facts: Facts) -> bool:
    if facts.any_step:
        return True
    if any(e.completed for d in facts.snap.dumps for e in d.entries):
        return True
    return any((f.last_completed or 0) > 0 or (f.seq or 0) > 1 for _, _, f in facts.snap.watchdog)


def lost(facts: Facts) -> Finding | None:
    """Ranks gone from a node that was looked at (no exit line): A. Silent where `departed`
    speaks: the same ranks, told with less."""
    if (
        not facts.missing
        or facts.node_exits
        or any(_left_for_sure(facts, r) for r in facts.missing)
    ):
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


def _lost(facts: Facts, lost_ranks: list[int], rule: str) -> Finding:
    first = _first_leaver(facts, lost_ranks)
    ordered = [first, *[r for r in lost_ranks if r != first]]
    # Ranks the launcher stopped after another rank failed are victims, not suspects; so are
    # ranks that failed well after the first one.
    culprits = _culprits_by_time(facts, ordered) or [
        r
        for r in ordered
        if r not in facts.departures or not facts.departures[r].stopped_by_launcher
    ]
    waited = [r for r in ordered if (d := facts.departures.get(r)) is not None and d.waited]
    if len(waited) == len(ordered):
        return _left_waiting(facts, ordered, rule)
    evidence: list[Quote] = []
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
    return Finding(
        "A",
        0.95 if strong else 0.8 if waiting else 0.65,
        f"Rank {first} did not come: {quotes.why_lost(facts, first)}{where}{more}{rest}"
        f"{step_text(facts)}. "
        f"Read rank {first}'s log tail and {node or 'its node'}'s dmesg.",
        suspects=tuple(culprits or [r for r in ordered if r not in waited]),
        suspect_nodes=tuple(sorted({facts.oom_by_pid[p][0] for p in _pids(facts, ordered)})),
        evidence=tuple(evidence),
        check=f"Rank {first}'s log tail and {node or 'its node'}'s `dmesg -T` around "
        f"{'its exit' if first in facts.departures else 'the time it vanished'}: the OOM killer, "
        "an Xid or a segfault names the cause; the others waited for it.",
        rule=rule,
    )


def _left_waiting(facts: Facts, gone: list[int], rule: str) -> Finding:
    """Every rank that left had first timed out (or lost a peer): they waited for a rank
    that did not come, and their lines do not say which."""
    evidence = [e for rank in gone[:6] for e in quotes.departure(facts, rank)[0]]
    return Finding(
        "A",
        0.5,
        f"{capitalised(ranks_text(gone))} went down after timing out waiting in a collective: "
        "victims of a rank that did not come, which their lines do not name.",
        evidence=tuple(evidence),
        check=(
            "The other ranks' log tails and stacks (py-spy), and the flight recorder: the rank "
            "that never entered the collective they timed out in."
        ),
        rule=rule,
    )


def _pids(facts: Facts, ranks) -> list[int]:
    pids = (facts.known_pid(r) for r in ranks)
    return [p for p in pids if p is not None and p in facts.oom_by_pid]


def unreachable(facts: Facts) -> Finding | None:
    """Nodes that gave nothing while the others wait: their ranks are unobserved, the node is
    the place to look (a lost node looks exactly like this)."""
    # Not gathered: a node whose evidence stopped short still speaks for what it holds.
    silent = sorted(n for n, f in facts.nodes.items() if not f.status.gathered)
    if not silent or not (facts.in_collective or facts.unobserved):
        return None
    evidence = [
        Quote(QuoteKind.NODE_UNREACHABLE, n, None, facts.nodes[n].status.describe())
        for n in silent[:5]
    ]
    waiting = list(facts.in_collective)
    if waiting:
        evidence += quotes.stack(facts, waiting[0])
    unseen = f"; {ranks_text(facts.unobserved)} unobserved" if facts.unobserved else ""
    rest = f"; {ranks_text(waiting)} wait in {facts.main_op()}" if waiting else ""
    return Finding(
        "A",
        0.6,
        f"{', '.join(silent[:5])} gave no evidence ({facts.nodes[silent[0]].status.describe()})"
        f"{unseen}"
        f"{rest}. Is the node alive? Check it and its ranks directly.",
        suspect_nodes=tuple(silent),
        evidence=tuple(evidence),
        check=f"ssh {silent[0]}: is it up, and are its ranks' processes alive (ps, py-spy dump)?",
        rule="unreachable",
    )
