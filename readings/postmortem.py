"""What a post-mortem draft says about the job, read from a diagnosis: what happened in plain
words, why the suspect rank left, what made it worse, and the prevention that fits this cause
(docs/domain.md, "Prevention the console should encourage").

Pure functions over the typed diagnosis; the incidents app adds the people and the times.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.diagnosis import Diagnosis
from analysis.records import GroupKind, RankRow, RankStatus, StackGroup
from analysis.verdict import Evidence

# Exit codes as the launchers print them: negative = killed by that signal, 128+N = the same
# through a shell.
_KILLED = {137, -9}
_SEGFAULT = {139, -11}
_ABORT = {134, -6}
# A watchdog timeout this many times the measured step time, plus a checkpoint's margin.
WATCHDOG_STEP_FACTOR = 5
CHECKPOINT_MARGIN_S = 300
# A timeout more than this many times the suggested one is called out as a contributing factor.
WATCHDOG_TOO_LONG_FACTOR = 3

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
    evidence: tuple[Evidence, ...]  # the lines that say so (the rank's, then its node's)

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
    kinds = {e.kind for e in lines if e.rank == rank or e.kind in ("xid", "node_unreachable")}
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
    if "dmesg_oom" in kinds:
        return "oom"
    if "xid" in kinds:
        return "gpu_fault"
    if "segfault" in kinds or code in _SEGFAULT:
        return "segfault"
    if code in _KILLED:
        return "killed"
    if code in _ABORT:
        return "abort"
    if code is not None or "log_error" in kinds:
        return "exception"
    if "node_unreachable" in kinds:
        return "node_lost"
    if row is not None and row.status is RankStatus.OUTSIDE:
        return "cpu_stall"
    return "unknown"


def what_happened(d: Diagnosis, classification: str, confirmed: str | None = None) -> str:
    """One paragraph: what the job did, in the class (and for A the cause, `confirmed`) the
    responders settled on."""
    step = d.last_completed_step
    opening = (
        f"The job ({d.world_size} ranks) stopped after step {step}."
        if step is not None
        else f"The job ({d.world_size} ranks) never completed a step."
    )
    return f"{opening} {cause_story(d, classification, confirmed)}".strip()


def cause_story(d: Diagnosis, classification: str, confirmed: str | None = None) -> str:
    """What went wrong, for this class, without the opening about the job."""
    if classification == "A":
        return _a_story(d, confirmed)
    return _CLASS_STORY.get(classification, _other_story)(d)


def _ranks_words(ranks: str, count: int | None = None) -> str:
    single = count == 1 if count is not None else ("," not in ranks and "-" not in ranks)
    return f"rank {ranks}" if single else f"ranks {ranks}"


def _waiting_group(d: Diagnosis) -> StackGroup | None:
    groups = [g for g in d.stack_groups if g.kind is GroupKind.COLLECTIVE]
    return max(groups, key=lambda g: g.rank_count) if groups else None


def _a_story(d: Diagnosis, confirmed: str | None = None) -> str:
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
    gone = next((e for e in cause.evidence if e.kind == "missing"), None)
    if cause.key == "unknown" and gone:
        # "rank 3: its process is gone (no longer in ps)": what the collection did see.
        seen = gone.text.split(": ", 1)[-1]
        text = f"Rank {cause.rank}{where} left the job: {seen}."
    waiting = _waiting_group(d)
    if waiting:
        text += (
            f" The other ranks ({waiting.ranks}) waited for it in {waiting.frame}, "
            "where a collective needs every rank."
        )
    return text


def _b_story(d: Diagnosis) -> str:
    mismatch = d.flight_recorder.first_mismatch if d.flight_recorder else None
    calls = mismatch.collectives if mismatch else ()
    if mismatch and len(calls) > 1:
        parts = [
            f"{_ranks_words(c.ranks, len(c.rank_list))} called {c.op}"
            + (f" at {c.frame}" if c.frame else "")
            for c in calls[:3]
        ]
        where = f"collective #{mismatch.seq} of group {mismatch.pg}"
        return f"The ranks ran different collectives at {where}: " + "; ".join(parts) + "."
    groups = d.stack_groups
    if len(groups) > 1:
        parts = [f"{_ranks_words(g.ranks, g.rank_count)} in {g.frame}" for g in groups[:3]]
        return "The ranks waited in different collectives: " + "; ".join(parts) + "."
    return "The ranks ran their collectives in a different order."


def _c_story(d: Diagnosis) -> str:
    waiting = _waiting_group(d)
    where = f" in {waiting.frame}" if waiting else ""
    text = f"Every rank was alive and waiting{where}, but their configuration differed"
    diffs = [*d.real_env_diffs, *d.nccl_config_diffs]
    if diffs:
        first = diffs[0]
        values = "; ".join(
            f"{v.value} on {', '.join(v.nodes) or _ranks_words(v.ranks)}" for v in first.values[:3]
        )
        text += f": {first.name} was {values}"
    if d.shell_init:
        s = d.shell_init[0]
        text += f" ({s.name} set in {s.path} on {s.node})"
    return text + "."


def _straggler_story(d: Diagnosis) -> str:
    suspects = d.suspect_ranks_compact
    nodes = ", ".join(d.suspect_nodes)
    who = (
        f"{_ranks_words(suspects)}" + (f" on {nodes}" if nodes else "") if suspects else "one rank"
    )
    return (
        f"It was still progressing, slowly: {who} took far longer per step and the others "
        "spent that time waiting for it in collectives."
    )


def _init_story(d: Diagnosis) -> str:
    missing = d.missing_ranks_compact or d.suspect_ranks_compact
    waiting = [g for g in d.stack_groups if g.kind is GroupKind.INIT]
    text = "The job hung at start-up, in the rendezvous"
    if waiting:
        who = ", ".join(_ranks_words(g.ranks, g.rank_count) for g in waiting)
        text += f": {who} waited in {waiting[0].frame}"
    if missing:
        text += f"; {_ranks_words(missing)} never joined"
    return text + "."


def _other_story(d: Diagnosis) -> str:
    # The verdict's first sentence is what it saw; the rest tells the responder what to do.
    summary = d.summary
    return summary.split(". ", 1)[0].rstrip(".") + "." if summary else ""


_CLASS_STORY = {
    "B": _b_story,
    "C": _c_story,
    "straggler": _straggler_story,
    "init": _init_story,
}


def watchdog_timeout_s(step_time_s: float | None) -> int | None:
    """A watchdog timeout for this job: 5 x the measured step time plus a checkpoint's margin,
    rounded up to the minute (120 s steps: 15 min)."""
    if not step_time_s or step_time_s <= 0:
        return None
    seconds = WATCHDOG_STEP_FACTOR * step_time_s + CHECKPOINT_MARGIN_S
    return int(math.ceil(seconds / 60) * 60)


def observed_watchdog_timeout_s(d: Diagnosis) -> float | None:
    """The timeout the job's watchdog used, from a quoted `Timeout(ms)=600000` line."""
    for e in d.evidence:
        text = e.text
        start = text.find("Timeout(ms)=")
        if e.kind != "watchdog" or start < 0:
            continue
        digits = text[start + 12 : start + 24]
        number = digits[: len(digits) - len(digits.lstrip("0123456789"))]
        if number:
            return int(number) / 1000
    return None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def prevention(d: Diagnosis, classification: str, confirmed: str | None = None) -> list[str]:
    """The actions that fit this incident's cause (for A the one the responders confirmed,
    `confirmed`, else the evidence's), most specific first. The generic watchdog advice only
    stands in when nothing more specific is known."""
    cause = departure_cause(d, confirmed) if classification == "A" else None
    specific = _cause_advice(cause) + _class_advice(d, classification)
    advice = specific + _watchdog_advice(d, classification, measured_only=bool(specific))
    advice += _consistency_advice(d, classification)
    advice += _flight_recorder_advice(d, classification)
    return advice


def _cause_advice(cause: DepartureCause | None) -> list[str]:
    if cause is None:
        return []
    key, rank, node = cause.key, cause.rank, cause.node or "its node"
    if key in CRASHES:
        return [
            f"Crash handler (rank {rank} {CAUSES[key]}): print and fsync the traceback first, "
            "clean up second, then os._exit(1) — never a collective such as "
            "destroy_process_group() in the handler."
        ]
    if key == "oom":
        return [
            f"Memory headroom on {node}: the OOM killer took rank {rank}. Alert on per-rank host "
            "memory (RSS, page cache of data workers) before the cgroup limit, and size "
            "batch, prefetch and dataloader workers to fit it."
        ]
    if key == "killed":
        return [
            f"Find who sent SIGKILL to rank {rank} on {node}: the scheduler (preemption, a "
            "time or memory limit: `sacct -j JOB --format=JobID,State,ExitCode`, the "
            "scheduler's log), a cgroup or container limit (the cgroup's `memory.events` "
            "oom_kill count, a pod's OOMKilled: such kills can miss the host's dmesg), or an "
            "operator or health check (shell history, the audit log).",
            "Make a rank's SIGKILL stop the whole job at once (the launcher tears down every "
            "rank when one exits), so the others fail fast instead of waiting in the "
            "collective.",
        ]
    if key == "gpu_fault":
        return [f"Drain {node} and run the GPU vendor's diagnostics before it rejoins the pool."]
    if key == "node_lost":
        return [f"Find why {node} dropped off the network; alert on node reachability."]
    if key == "cpu_stall":
        where = f" ({cause.frame})" if cause.frame else ""
        return [
            f"Bound the CPU-side work that stalled rank {rank}{where}: a DataLoader timeout, "
            "I/O with timeouts, no lock held across a collective; log per-rank data time."
        ]
    return []


def _class_advice(d: Diagnosis, classification: str) -> list[str]:
    if classification == "B":
        return [
            "No collective under a rank-dependent branch: every rank must call the same "
            "collectives in the same order (pad variable-length batches, collective calls "
            "outside `if rank == 0:`)."
        ]
    if classification == "straggler":
        return [
            "Log per-rank step, data and communication times and alert when one rank's step "
            "time leaves the pack."
        ]
    if classification == "init":
        return [
            "Check MASTER_ADDR, MASTER_PORT and node_rank in the launcher before the job "
            "starts, and give the rendezvous a timeout shorter than the watchdog's."
        ]
    return []


def _watchdog_advice(
    d: Diagnosis, classification: str, *, measured_only: bool = False
) -> list[str]:
    if classification in ("straggler", "init", "healthy"):
        return []
    step = d.progress.step_time_s
    suggested = watchdog_timeout_s(step)
    if suggested is None:
        if measured_only:
            return []
        return [
            "Set the NCCL watchdog timeout (init_process_group(timeout=...)) to 3-5x the step "
            "time plus a checkpoint margin, and log step times so it can be measured."
        ]
    observed = observed_watchdog_timeout_s(d)
    was = f" (it was {_minutes(observed)})" if observed else ""
    return [
        f"Set the NCCL watchdog timeout to {_minutes(suggested)}{was}: "
        f"{WATCHDOG_STEP_FACTOR} x the measured step time of {step:g} s plus "
        f"{CHECKPOINT_MARGIN_S // 60} min for a checkpoint save, so the next hang fails fast."
    ]


def _consistency_advice(d: Diagnosis, classification: str) -> list[str]:
    if classification != "C" and not d.real_env_diffs and not d.shell_init:
        return []
    advice = [
        "At start-up, dump `env | grep -E 'NCCL|TORCH|CUDA' | sort` on every rank and refuse "
        "to start if the ranks differ."
    ]
    if d.shell_init:
        advice.append(
            "Remove NCCL_ exports from shell start-up files (/etc/profile, /etc/bashrc, "
            "~/.bashrc); set them in the job's launcher only."
        )
    return advice


def _flight_recorder_advice(d: Diagnosis, classification: str) -> list[str]:
    if classification in ("straggler", "healthy"):
        return []
    if not (d.flight_recorder and d.flight_recorder.dump_count):
        return [
            "Turn the flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE=2000, "
            "TORCH_NCCL_DUMP_ON_TIMEOUT=1): this incident had no dumps to name the first "
            "unmatched collective."
        ]
    if classification == "B":
        return [
            "Keep the flight recorder on (TORCH_NCCL_TRACE_BUFFER_SIZE): it named the first "
            "unmatched collective here."
        ]
    return []


def contributing_factors(d: Diagnosis) -> list[str]:
    """What made this incident worse or slower to find, as the evidence shows it."""
    factors = []
    step = d.progress.step_time_s
    observed, suggested = observed_watchdog_timeout_s(d), watchdog_timeout_s(step)
    if observed and suggested and observed > WATCHDOG_TOO_LONG_FACTOR * suggested:
        factors.append(
            f"The watchdog waited {_minutes(observed)} for {step:g} s steps: the job sat idle "
            "that long before anything failed."
        )
    if not (d.flight_recorder and d.flight_recorder.dump_count):
        factors.append("No flight-recorder dumps were collected.")
    if d.shell_init:
        nodes = sorted({s.node for s in d.shell_init if s.node})
        factors.append(f"NCCL_ variables set in shell start-up files on {', '.join(nodes)}.")
    if d.unobserved_ranks:
        factors.append(
            f"Nothing was collected about ranks {d.unobserved_ranks_compact} "
            "(the evidence is incomplete)."
        )
    return factors


def evidence_quality(d: Diagnosis, limit: int = 5) -> list[str]:
    """The console's own trouble reading the evidence (a log with no line it knows, a file
    cut at the cap): a note on how far the verdict can be trusted, never a cause."""
    problems = d.parse_problems
    shown = [
        f"{p.node or 'the bundle'}: {p.problem or p.source or 'unreadable'}"
        for p in problems[:limit]
    ]
    if len(problems) > limit:
        shown.append(f"and {len(problems) - limit} more")
    return shown
