"""What a post-mortem draft says about the job, read from a diagnosis: what happened in plain
words, why the suspect rank left, what made it worse, and the prevention that fits this cause
(docs/domain.md, "Prevention the console should encourage").

Pure functions over the typed diagnosis; the incidents app adds the people and the times.
"""

from __future__ import annotations

import math

from analysis.diagnosis import Diagnosis
from analysis.verdict import QuoteKind
from readings.classes import reading
from readings.stories import CAUSES, CRASHES, DepartureCause, departure_cause

# A watchdog timeout this many times the measured step time, plus a checkpoint's margin.
WATCHDOG_STEP_FACTOR = 5
CHECKPOINT_MARGIN_S = 300
# A timeout more than this many times the suggested one is called out as a contributing factor.
WATCHDOG_TOO_LONG_FACTOR = 3


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
    return reading(classification).story(d, confirmed)


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
        if e.kind != QuoteKind.WATCHDOG or start < 0:
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
