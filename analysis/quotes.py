"""The lines a verdict quotes: small pure functions from facts to evidence."""

from __future__ import annotations

import re

from analysis.departures import exit_reason
from analysis.facts import Facts
from analysis.progress import Progress
from analysis.snapshot_parse import line_rank
from analysis.verdict import Quote, QuoteKind, ranks_text


def stack(facts: Facts, rank: int) -> list[Quote]:
    """Where a rank's main thread is, and what its GPU's load says about it."""
    state = facts.ranks.get(rank)
    if state is None or not state.stack:
        return []
    quoted = [Quote(QuoteKind.STACK, state.node, rank, state.innermost_frame or state.stack[0])]
    if state.gpu_util is not None:
        # 100 % without progress = NCCL spinning in a collective; 0 % with memory held =
        # stuck on the CPU side (data, I/O, a lock).
        if state.gpu_util >= 90:
            reading = "spinning in a collective"
        elif state.gpu_util <= 5 and (state.gpu_memory_mib or 0) > 0:
            reading = "stuck on the CPU side"
        else:
            reading = "partly busy"
        text = f"GPU {state.gpu} at {state.gpu_util}% holding {state.gpu_memory_mib}MiB: {reading}"
        quoted.append(Quote(QuoteKind.GPU, state.node, rank, text))
    return quoted


def stacks(facts: Facts, ranks, limit: int = 5) -> list[Quote]:
    return [e for rank in list(ranks)[:limit] for e in stack(facts, rank)]


def progress(p: Progress) -> Quote:
    return Quote(QuoteKind.PROGRESS, None, None, p.describe())


def flight_recorder(first: dict) -> Quote:
    parts = "; ".join(
        f"{ranks_text(c['rank_list'])}: {c['signature']}" for c in first["collectives"]
    )
    lost = first["missing_rank_list"]
    missing = f"; missing on {ranks_text(lost)}" if lost else ""
    return Quote(
        QuoteKind.FLIGHT_RECORDER,
        None,
        None,
        f"first unmatched collective: group {first['pg']} #{first['seq']}: {parts}{missing}",
    )


def why_lost(facts: Facts, rank: int) -> str:
    """One phrase: how we know this rank is gone."""
    pid = facts.known_pid(rank)
    if pid is not None and pid in facts.oom_by_pid:
        return f"its process {pid} was killed by the OOM killer"
    departure = facts.departures.get(rank)
    if departure is not None:
        return departure.reason
    state = facts.ranks.get(rank)
    if state is None and facts.node_of(rank) is None:
        return "no process and no log line of it were found on any node"
    return "its process is gone (no longer in ps)"


def departure(facts: Facts, rank: int) -> tuple[list[Quote], bool]:
    """Quote why a rank is gone; True when a decisive line (OOM, exit, Xid) was found."""
    node = facts.node_of(rank)
    pid = facts.known_pid(rank)
    quoted: list[Quote] = []
    strong = False
    for kill_pid, (kill_node, line, recent) in sorted(facts.oom_by_pid.items()):
        if kill_pid == pid or (kill_node == node and pid is None and recent):
            quoted.append(Quote(QuoteKind.DMESG_OOM, kill_node, rank, line))
            strong = True
    kernel = facts.nodes[node].kernel if node in facts.nodes else None
    for xid in kernel.xids if kernel else ():
        if facts.before_job(xid.line):
            continue
        quoted.append(Quote(QuoteKind.XID, node, rank, f"{xid.line}  [{xid.meaning}]"))
        strong = strong or xid.fatal
    for seg in kernel.segfaults if kernel else ():
        if facts.before_job(seg.line):
            continue
        if pid is None or seg.pid == pid:
            quoted.append(Quote(QuoteKind.SEGFAULT, node, rank, seg.line))
            strong = True
    gone = facts.departures.get(rank)
    if gone is not None:
        fallback = exit_reason(gone.exit_code) if gone.exit_code is not None else gone.reason
        quoted.append(Quote(QuoteKind.EXIT_CODE, node, rank, gone.line or fallback))
        strong = strong or not gone.stopped_by_launcher
    quoted.extend(log_errors(facts, rank))
    if gone is None:
        quoted.append(Quote(QuoteKind.MISSING, node, rank, f"rank {rank}: {why_lost(facts, rank)}"))
    return quoted, strong


# What a failing rank's quoted lines say, in this order: the line saying what happened (the
# line reader's kinds), then what else the log called an error.
_SAYS_WHAT = ("exception", "gpu_oom", "oom", "segfault", "killed", "fatal", "xid", "exit")
# Python's traceback plumbing: where, not what (`Traceback (most recent call last):`,
# `File "x.py", line 3, in f`, `raise ValueError(`).
_PLUMBING = re.compile(
    r"^(?:\[[^\]]{0,40}\]:?\s*)*(?:Traceback \(most recent call|File \"|raise\b)"
)


def log_errors(facts: Facts, rank: int, limit: int = 3) -> list[Quote]:
    found = facts.snap.signals.by_rank.get(rank)
    quoted: list[Quote] = []
    if found is not None:
        for kind in _SAYS_WHAT:
            for signal in found.failures:
                if (
                    signal.kind == kind
                    and not facts.before_job(signal.text)
                    and all(e.text != signal.text for e in quoted)
                ):
                    quoted.append(Quote(QuoteKind.LOG_ERROR, signal.node, rank, signal.text))
    for node_name, log in facts.snap.logs_of_note:
        if not log.errors:
            continue  # most logs of a big job (their timeouts are signals)
        local = facts.local_maps.get(node_name, {})
        mine = [
            fact
            for fact in log.errors
            if line_rank(fact, local) == rank
            and not facts.before_job(fact.line)
            and not _PLUMBING.match(fact.line.strip())
            and all(e.text != fact.line for e in quoted)
        ]
        quoted.extend(Quote(QuoteKind.LOG_ERROR, node_name, rank, f.line) for f in mine[:limit])
    return quoted[:limit]


def frame_of(facts: Facts, ranks, fallback: str = "") -> str:
    """The user's call site in the first of these ranks' stacks (first frame outside torch)."""
    for rank in ranks:
        state = facts.ranks.get(rank)
        if state and len(state.stack) > 2:
            for frame in state.stack:
                if not frame.split("(")[-1].startswith("torch/"):
                    return frame
        if state and state.innermost_frame and not fallback:
            return state.innermost_frame
    return fallback or "the collective call sites"


def diff_text(diff: dict) -> str:
    parts = []
    for value in diff["values"][:4]:
        nodes = ", ".join(value["nodes"][:3]) + ("..." if value["node_count"] > 3 else "")
        if value.get("ranks"):
            single = value.get("rank_count") == 1
            on = f" on rank {value['ranks']}" if single else f" on ranks {value['ranks']}"
        else:
            on = ""
        parts.append(f"{value['value']!s}{on} ({nodes})")
    return f"{diff['name']}: " + "; ".join(parts)
