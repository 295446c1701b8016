"""What the line reader's signals say about who failed first, in any wording (issue 17).

Each rank's lines are summed in `facts.snap.signals`: its failures, when its log last moved,
the peers it names. The rank that failed first, of a cause of its own (an exception, a kill,
a segfault, an OOM, a GPU fault), is the culprit; ranks whose lines say they waited (timeouts,
lost peers, desync and RAS reports) are its victims. A kernel line about a process joins its
rank through the pid; NCCL's RAS names the rank it cannot reach; a process stopped (T) or in
the kernel (D) cannot come to a collective; a node a scheduler marks failed takes its ranks.
"""

from __future__ import annotations

import re
from dataclasses import replace

from analysis import jobtime, quotes
from analysis.departures import waited
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.parsers.dmesg import FATAL_XIDS, XID_MEANING
from analysis.signals import Signal
from analysis.signals.summary import RankSignals
from analysis.verdict import Quote, QuoteKind, capitalised, ranks_text

# Failures that are a rank's own cause; a fatal error or an exception counts only when it
# does not quote a timeout or a lost peer.
CAUSES = frozenset(
    {"exception", "fatal", "killed", "segfault", "oom", "gpu_oom", "xid", "exit", "evicted"}
)
# What a rank reports about the job rather than of itself: an exception quoting a mismatch
# or a failed rendezvous is that report, not a cause of its own.
REPORTS = frozenset({"mismatch", "rendezvous", "init"})
DECISIVE = frozenset({"killed", "segfault", "oom", "gpu_oom", "xid", "evicted"})
# Failures this close to the first one are the same event.
SAME_FAILURE_S = 5.0
QUOTED = 4
_XID, _RAS, _DESYNC = ("xid",), ("ras",), ("desync",)


def _first_cause(facts: Facts, rank: int, found: RankSignals) -> Signal | None:
    gone = facts.departures.get(rank)
    if gone is not None and gone.stopped_by_launcher:
        return None  # the launcher stopped it, or it first waited for another: a victim
    if found.first_failure is not None and waited(found.first_failure, found):
        return None  # its first failure was waiting for another rank: whatever came after
    reports = {s.text for s in found.failures if s.kind in REPORTS}
    causes = [
        s
        for s in found.failures
        if s.kind in CAUSES
        and not waited(s, found)
        and s.text not in reports
        and not facts.before_job(s.text)
    ]
    if not causes:
        return None
    stamped = [s for s in causes if s.at is not None]
    return min(stamped, key=lambda s: s.at) if stamped else causes[0]


def failed_first(facts: Facts) -> Finding | None:
    """The ranks whose own lines say they failed of a cause of their own, the earliest first;
    the ranks that report waiting are their victims."""
    # signalled: the ranks with a failure of their own (a rank only a step moved has none)
    signalled = facts.snap.signals.signalled
    # Only a rank with a failure of a cause's kind can have one (a few of 32,000 ranks).
    candidates = dict.fromkeys(rank for rank, _ in facts.failures.of_kinds(CAUSES))
    firsts = {r: s for r in candidates if (s := _first_cause(facts, r, signalled[r]))}
    if not firsts:
        return None
    culprits = _earliest(firsts)
    first = firsts[culprits[0]]
    victims = sorted(
        r
        for r, found in facts.snap.signals.signalled.items()
        if r not in firsts
        and found.first_failure is not None
        and waited(found.first_failure, found)
    )
    evidence = [Quote(s.kind, s.node, r, s.text) for r, s in firsts.items() if r in culprits]
    for rank in victims[:2]:
        line = facts.snap.signals.by_rank[rank].first_failure
        evidence.append(Quote(line.kind, line.node, rank, line.text))
    then = f"; {ranks_text(victims)} then reported waiting for it" if victims else ""
    return Finding(
        "A",
        0.9 if first.kind in DECISIVE else 0.8,
        f"{capitalised(ranks_text(culprits))} failed first ({_what(first)}: "
        f"{first.text.strip()[:160]}){then}.",
        suspects=tuple(culprits),
        suspect_nodes=tuple(
            sorted({s.node for r, s in firsts.items() if r in culprits and s.node})
        ),
        evidence=tuple(evidence[:8]),
        check=(
            f"Rank {culprits[0]}'s log tail around that line (the traceback above it) and its "
            "node's `dmesg -T`: what it failed of; the others' timeouts came after."
        ),
        rule="failed_first",
    )


def _earliest(firsts: dict[int, Signal]) -> list[int]:
    stamped = sorted((s.at, r) for r, s in firsts.items() if s.at is not None)
    if not stamped:
        return sorted(firsts)
    start = stamped[0][0]
    return sorted(r for at, r in stamped if (at - start).total_seconds() <= SAME_FAILURE_S)


def _what(signal: Signal) -> str:
    if signal.kind == "xid" and signal.code is not None:
        meaning = XID_MEANING.get(signal.code, "a GPU fault")
        return f"NVIDIA Xid {signal.code}, {meaning}"
    return {
        "exception": "an exception",
        "fatal": "a fatal error",
        "killed": "killed",
        "segfault": "a segfault",
        "oom": "the OOM killer",
        "gpu_oom": "CUDA out of memory",
        "exit": "an error exit",
        "evicted": "evicted",
    }.get(signal.kind, signal.kind)


def gpu_fault(facts: Facts) -> Finding | None:
    """A kernel Xid line naming a rank's process (its pid in the rank's environ): that rank's
    GPU faulted under it."""
    hit = {r: s for r, s in facts.failures.of_kinds(_XID) if s.code is not None}
    if not hit:
        return None
    ranks = sorted(hit)
    fatal = any(s.code in FATAL_XIDS for s in hit.values())
    first = hit[ranks[0]]
    return Finding(
        "A",
        0.9 if fatal else 0.8,
        f"{capitalised(ranks_text(ranks))}'s GPU faulted under its process ({_what(first)}): "
        "it cannot finish its collectives, the others wait for it.",
        suspects=tuple(ranks),
        suspect_nodes=tuple(sorted({s.node for s in hit.values() if s.node})),
        evidence=tuple(Quote(QuoteKind.XID, s.node, r, s.text) for r, s in sorted(hit.items())[:4]),
        check=(
            f"`nvidia-smi -q` and `dmesg -T | grep -i xid` on {first.node or 'its node'}: "
            "the GPU's state, and whether the Xid repeats (drain the node if it does)."
        ),
        rule="gpu_fault",
    )


def ras_named(facts: Facts) -> Finding | None:
    """NCCL's RAS names ranks it cannot reach, that are dead or behind: the others wait."""
    signals = facts.snap.signals
    lines = [s for s in signals.ras_signals if s.kind == "ras"]
    lines += facts.failures.nodes_of_kinds(_RAS)
    lines += [s for _, s in facts.failures.of_kinds(_RAS)]
    if not lines:
        return None  # no RAS line: nothing named (and no map of every node's pids)
    pids = {
        pid: rank
        for node in facts.nodes.values()
        for pid, rank in {**node.log_pids, **node.rank_pids}.items()
    }
    # RAS names a process by pid and node when it cannot say its rank: the environ can, or
    # the node's logs (NCCL's set-up lines, a launcher's) for a process that is gone.
    lines = [replace(s, peer=pids[s.pid]) if s.peer is None and s.pid in pids else s for s in lines]
    named = sorted({s.peer for s in lines if s.peer is not None})
    if not named:
        return None
    lines = [s for s in lines if s.peer is not None] + [s for s in lines if s.peer is None]
    return Finding(
        "A",
        0.85,
        f"NCCL RAS names {ranks_text(named)} as missing, dead or behind "
        f"({lines[0].text.strip()[:160]}): the other ranks wait for "
        f"{'it' if len(named) == 1 else 'them'}.",
        suspects=tuple(named),
        evidence=tuple(Quote(QuoteKind.RAS, s.node, s.peer, s.text) for s in lines[:QUOTED]),
        check=(
            f"ps and py-spy dump of {ranks_text(named[:3])} on its node (RAS gives the host and "
            "pid): dead, stopped, or stuck outside the collective."
        ),
        rule="ras_named",
    )


def process_state(facts: Facts) -> Finding | None:
    """A rank's process stopped (T: SIGSTOP, a debugger) or in uninterruptible sleep (D: I/O,
    NFS, the GPU driver) while others wait: it is not coming."""
    held = facts.held
    others = len(facts.ranks) > len(held)  # held is of the ranks
    if not held or not others or len(held) > max(1, len(facts.ranks) // 2):
        return None
    ranks = sorted(held)
    stopped = [r for r in ranks if held[r] == "T"]
    what = (
        "stopped (ps state T)" if stopped else "in uninterruptible sleep in the kernel (ps state D)"
    )
    waiting = facts.in_collective or not facts.progress.progressing
    state = facts.ranks[ranks[0]]
    evidence = [
        Quote(
            "process_state",
            facts.ranks[r].node,
            r,
            f"rank {r} (pid {facts.ranks[r].pid}): ps state {facts.ranks[r].state}",
        )
        for r in ranks[:QUOTED]
    ]
    evidence += quotes.stacks(facts, ranks, limit=2)
    return Finding(
        "A",
        (0.9 if stopped else 0.8) if waiting else 0.55,
        f"{capitalised(ranks_text(ranks))} {'is' if len(ranks) == 1 else 'are'} {what} on "
        f"{state.node}: {'it' if len(ranks) == 1 else 'they'} cannot come to a collective "
        "while the others wait.",
        suspects=tuple(ranks),
        evidence=tuple(evidence),
        check=(
            f"On {state.node}: `cat /proc/{state.pid}/wchan /proc/{state.pid}/stack` (as root) "
            "for the kernel function it waits in, and `dmesg -T` for hung-task lines"
            + ("; `kill -CONT` resumes a stopped process" if stopped else "")
            + "."
        ),
        rule="process_state",
    )


def node_failure(facts: Facts) -> Finding | None:
    """A scheduler or cluster manager marks a node failed, down or dead (no rank named)."""
    named = {
        node: signals
        for node, signals in facts.snap.signals.by_node.items()
        if any(
            s.kind in ("node_state", "evicted") and not jobtime.before_job(s.at, facts.job_started)
            for s in signals
        )
    }
    if not named:
        return None
    # A node that answered the console with its own evidence is alive: of the nodes named,
    # the ones that did not are the failed ones (the others report the failure).
    answered = {n for n, f in facts.nodes.items() if f.status.gathered}
    nodes = sorted(set(named) - answered) or sorted(named)
    lines = [s for n in nodes for s in named[n] if s.kind in ("node_state", "evicted")]
    return Finding(
        "A",
        0.75,
        f"{', '.join(nodes[:4])} {'was' if len(nodes) == 1 else 'were'} marked failed or lost "
        f"({lines[0].text.strip()[:160]}): its ranks left the job.",
        suspect_nodes=tuple(nodes),
        evidence=tuple(Quote(s.kind, s.node, None, s.text) for s in lines[:QUOTED]),
        check=(
            f"The scheduler's view of {nodes[0]} (`scontrol show node`, `kubectl describe "
            "node`, `ray status`): its state, reason and when it changed."
        ),
        rule="node_failure",
    )


def _about(reporter: int, peer: int, signal: Signal, not_ready: set[int]) -> int | None:
    """The rank an evidence line is filed under: its writer, or, for a stall report that names
    a rank only by leaving it out of the ready ones, the rank it leaves out."""
    if reporter >= 0:
        return reporter
    return peer if id(signal) in not_ready else None


def peers_named(facts: Facts) -> Finding | None:
    """Ranks that other ranks' lines name as the ones they wait for or lost (a desync or
    stall report, a monitored barrier, a lost peer): the named are the suspects, the
    reporters their victims."""
    named: dict[int, list[tuple[int, Signal]]] = {}
    for rank, signal in facts.failures.with_peer():
        if signal.peer != rank:
            named.setdefault(signal.peer, []).append((rank, signal))
    # A report no rank prefix ties to its writer (a coordinator's stdout) still names the peer.
    for signal in facts.failures.node_signals:
        if signal.peer is not None:
            named.setdefault(signal.peer, []).append((-1, signal))
    # Left out of a stall report's ready ranks: the line is about the rank it leaves out.
    not_ready = {id(line) for line in facts.not_ready.values()}
    for peer, line in facts.not_ready.items():
        named.setdefault(peer, []).append((-1, line))
    if not named:
        return None
    peers = sorted(named)
    if len(peers) > max(1, facts.world // 2):
        return None  # half the job named: a broken network, not a culprit
    reporters = sorted({r for lines in named.values() for r, _ in lines} - set(peers) - {-1})
    evidence = [
        Quote(signal.kind, signal.node, _about(reporter, peer, signal, not_ready), signal.text)
        for peer in peers[:3]
        for reporter, signal in named[peer][:2]
    ]
    for peer in peers[:2]:
        evidence += quotes.log_errors(facts, peer)
    by = f" by {ranks_text(reporters)}" if reporters else ""
    return Finding(
        "A",
        0.75,
        f"{capitalised(ranks_text(peers))} {'is' if len(peers) == 1 else 'are'} named{by} as "
        f"the rank{'' if len(peers) == 1 else 's'} they wait for "
        f"({named[peers[0]][0][1].text.strip()[:140]}): the reporters are victims.",
        suspects=tuple(peers),
        evidence=tuple(evidence),
        check=(
            f"Stacks (py-spy dump) and the log tail of {ranks_text(peers[:3])}: where "
            f"{'it is' if len(peers) == 1 else 'they are'} instead of the collective the others "
            "wait in."
        ),
        rule="peers_named",
    )


# A stall report's listing of what one rank has not submitted: `1: [allreduce.c_d1.bias, ...]`
# (Horovod names each tensor by its op first).
_LISTED_OPS = re.compile(r"^\s{0,8}(?:\[[^\]]{0,40}\]<\w{1,8}>:)?\d{1,7}: \[([^\]]{1,20000})")


def stalled_apart(facts: Facts) -> Finding | None:
    """A stall report listing, for two or more ranks, the collectives each has not submitted,
    and the lists share no op: each waits in a collective the others never issue (B)."""
    missing: dict[int, set[str]] = {}
    lines: dict[int, Signal] = {}
    reports = [s for _, s in facts.failures.of_kinds(_DESYNC)]
    reports += facts.failures.nodes_of_kinds(_DESYNC)
    for signal in reports:
        listed = _LISTED_OPS.match(signal.text)
        if listed and signal.peer is not None:
            names = listed.group(1).split(", ")[:64]
            # PyTorch's names lead with the op (`allreduce.c_d1.bias`); TensorFlow's are
            # the tensor's own (`HorovodBroadcast_dense_kernel_0`).
            ops = {t.split(".", 1)[0] if "." in t else t.strip() for t in names}
            missing.setdefault(signal.peer, set()).update(ops)
            lines.setdefault(signal.peer, signal)
    if len(missing) < 2:
        return None
    ranks = sorted(missing)
    if any(missing[a] & missing[b] for a in ranks for b in ranks if a < b):
        return None
    parts = "; ".join(f"rank {r} lacks {', '.join(sorted(missing[r]))}" for r in ranks[:4])
    return Finding(
        "B",
        0.8,
        f"The stall report lists different collectives missing on different ranks ({parts}): "
        "each waits in a collective another never issues. Look for a rank-dependent branch "
        "or an order that differs between ranks.",
        evidence=tuple(Quote(QuoteKind.DESYNC, s.node, None, s.text) for s in lines.values())[:4],
        check=(
            "The code paths that issue these collectives on each rank (HOROVOD_STALL_CHECK's "
            "tensor names): which branch, or which order, differs."
        ),
        rule="stalled_apart",
    )
