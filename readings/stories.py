"""Each class's story of what went wrong, for a post-mortem draft and the guided questions: why
the first suspect rank left (`departure_cause`), and one paragraph per class, read from the
typed diagnosis (the table of classes, `readings/classes.py`, names each class's story).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.diagnosis import Diagnosis
from analysis.records import GroupKind, RankRow, RankStatus, StackGroup
from analysis.verdict import Quote, QuoteKind

# Exit codes as the launchers print them: negative = killed by that signal, 128+N = the same
# through a shell.
_KILLED = {137, -9}
_SEGFAULT = {139, -11}
_ABORT = {134, -6}

CAUSES = {
    "oom": "killed by the kernel OOM killer",
    "killed": "killed with SIGKILL (exit code 137) by someone other than the OOM killer",
    "segfault": "crashed with a segmentation fault",
    "abort": "aborted (SIGABRT) after an error",
    "exception": "exited on a Python exception",
    "gpu_fault": "lost its GPU (NVRM Xid)",
    "node_lost": "lost with its node (unreachable)",
    "cpu_stall": "alive but stuck outside any collective (CPU side: data, I/O or a lock)",
    "unknown": "gone for a reason the evidence does not show",
}
# Causes where the process died by itself and its crash handler ran: the only ones where
# "print first, clean up second" advice applies (not a process the kernel or a person killed).
CRASHES = frozenset({"segfault", "abort", "exception"})


@dataclass(frozen=True)
class DepartureCause:
    """Why the first suspect rank left or stalled."""

    key: str  # a key of CAUSES: the responders' answer when they gave one, else the evidence's
    evidence_key: str  # what the evidence alone shows
    confirmed: bool  # `key` is the responders' answer
    rank: int | None
    node: str | None
    exit_code: int | None
    frame: str
    evidence: tuple[Quote, ...]  # the lines that say so (the rank's, then its node's)

    @property
    def words(self) -> str:
        return CAUSES[self.key]


def departure_cause(d: Diagnosis, confirmed: str | None = None) -> DepartureCause:
    """Why the first suspect rank left or stalled: a key of CAUSES, the rank and node, the
    exit code, and the evidence lines that say so. `confirmed` is the cause the responders
    settled on (a key of CAUSES): it wins over what the evidence shows, and `evidence_key`
    keeps the latter."""
    suspects = d.suspect_ranks or d.missing_ranks
    rank = suspects[0] if suspects else None
    row = d.rank_row(rank)
    node = (row.node if row else None) or (d.suspect_nodes[0] if d.suspect_nodes else None)
    lines = [
        e for e in d.evidence if (e.rank == rank and rank is not None) or (e.node == node and node)
    ]
    # A line of the rank's own says why it left; of its node's, only a GPU fault or the node
    # lost (an OOM kill in a node's dmesg may be any process's).
    kinds = {
        e.kind
        for e in lines
        if e.rank == rank or e.kind in (QuoteKind.XID, QuoteKind.NODE_UNREACHABLE)
    }
    evidence_key = _cause_key(kinds, row)
    key = confirmed if confirmed in CAUSES else evidence_key
    return DepartureCause(
        key=key,
        evidence_key=evidence_key,
        confirmed=key == confirmed,
        rank=rank,
        node=node,
        exit_code=row.exit_code if row else None,
        frame=row.frame if row else "",
        evidence=tuple(lines[:6]),
    )


def _cause_key(kinds: set[str], row: RankRow | None) -> str:
    code = row.exit_code if row else None
    if QuoteKind.DMESG_OOM in kinds:
        return "oom"
    if QuoteKind.XID in kinds:
        return "gpu_fault"
    if QuoteKind.SEGFAULT in kinds or code in _SEGFAULT:
        return "segfault"
    if code in _KILLED:
        return "killed"
    if code in _ABORT:
        return "abort"
    if code is not None or QuoteKind.LOG_ERROR in kinds:
        return "exception"
    if QuoteKind.NODE_UNREACHABLE in kinds:
        return "node_lost"
    if row is not None and row.status is RankStatus.OUTSIDE:
        return "cpu_stall"
    return "unknown"


def ranks_words(ranks: str, count: int | None = None) -> str:
    single = count == 1 if count is not None else ("," not in ranks and "-" not in ranks)
    return f"rank {ranks}" if single else f"ranks {ranks}"


def waiting_group(d: Diagnosis) -> StackGroup | None:
    groups = [g for g in d.stack_groups if g.kind is GroupKind.COLLECTIVE]
    return max(groups, key=lambda g: g.rank_count) if groups else None


def a_story(d: Diagnosis, confirmed: str | None = None) -> str:
    cause = departure_cause(d, confirmed)
    if cause.rank is None:
        return "Some ranks did not come to the collective the others waited in."
    where = f" on {cause.node}" if cause.node else ""
    what = cause.words
    if cause.key == "cpu_stall" and cause.frame:
        what += f", in {cause.frame}"
    elif cause.exit_code is not None and f"exit code {cause.exit_code}" not in what:
        what += f" (exit code {cause.exit_code})"
    text = f"Rank {cause.rank}{where} was {what}."
    gone = next((e for e in cause.evidence if e.kind == QuoteKind.MISSING), None)
    if cause.key == "unknown" and gone:
        # "rank 3: its process is gone (no longer in ps)": what the collection did see.
        seen = gone.text.split(": ", 1)[-1]
        text = f"Rank {cause.rank}{where} left the job: {seen}."
    waiting = waiting_group(d)
    if waiting:
        text += (
            f" The other ranks ({waiting.ranks}) waited for it in {waiting.frame}, "
            "where a collective needs every rank."
        )
    return text


def b_story(d: Diagnosis, confirmed: str | None = None) -> str:
    mismatch = d.flight_recorder.first_mismatch if d.flight_recorder else None
    calls = mismatch.collectives if mismatch else ()
    if mismatch and len(calls) > 1:
        parts = [
            f"{ranks_words(c.ranks, len(c.rank_list))} called {c.op}"
            + (f" at {c.frame}" if c.frame else "")
            for c in calls[:3]
        ]
        where = f"collective #{mismatch.seq} of group {mismatch.pg}"
        return f"The ranks ran different collectives at {where}: " + "; ".join(parts) + "."
    groups = d.stack_groups
    if len(groups) > 1:
        parts = [f"{ranks_words(g.ranks, g.rank_count)} in {g.frame}" for g in groups[:3]]
        return "The ranks waited in different collectives: " + "; ".join(parts) + "."
    return "The ranks ran their collectives in a different order."


def c_story(d: Diagnosis, confirmed: str | None = None) -> str:
    waiting = waiting_group(d)
    where = f" in {waiting.frame}" if waiting else ""
    text = f"Every rank was alive and waiting{where}, but their configuration differed"
    diffs = [*d.real_env_diffs, *d.nccl_config_diffs]
    if diffs:
        first = diffs[0]
        values = "; ".join(
            f"{v.value} on {', '.join(v.nodes) or ranks_words(v.ranks)}" for v in first.values[:3]
        )
        text += f": {first.name} was {values}"
    if d.shell_init:
        s = d.shell_init[0]
        text += f" ({s.name} set in {s.path} on {s.node})"
    return text + "."


def straggler_story(d: Diagnosis, confirmed: str | None = None) -> str:
    suspects = d.suspect_ranks_compact
    nodes = ", ".join(d.suspect_nodes)
    who = f"{ranks_words(suspects)}" + (f" on {nodes}" if nodes else "") if suspects else "one rank"
    return (
        f"It was still progressing, slowly: {who} took far longer per step and the others "
        "spent that time waiting for it in collectives."
    )


def init_story(d: Diagnosis, confirmed: str | None = None) -> str:
    missing = d.missing_ranks_compact or d.suspect_ranks_compact
    waiting = [g for g in d.stack_groups if g.kind is GroupKind.INIT]
    text = "The job hung at start-up, in the rendezvous"
    if waiting:
        who = ", ".join(ranks_words(g.ranks, g.rank_count) for g in waiting)
        text += f": {who} waited in {waiting[0].frame}"
    if missing:
        text += f"; {ranks_words(missing)} never joined"
    return text + "."


def other_story(d: Diagnosis, confirmed: str | None = None) -> str:
    # The verdict's first sentence is what it saw; the rest tells the responder what to do.
    summary = d.summary
    return summary.split(". ", 1)[0].rstrip(".") + "." if summary else ""
