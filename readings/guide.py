"""The guided decision workflow: the four questions an SRE answers first, answered from a
diagnosis, and where to look next for each verdict (docs/domain.md)."""

from __future__ import annotations

from typing import Any

from analysis.diagnosis import Diagnosis
from analysis.progress import Progress
from analysis.records import GroupKind, StackGroup

# Plain names first: what the evidence shows. The sources' images ("someone did not come")
# are at most a subtitle (CLASS_SUBTITLES), never the name.
CLASS_NAMES = {
    "A": "A · a rank left or stalled outside the collective",
    "B": "B · ranks in different collectives",
    "C": "C · configuration differs between ranks",
    "straggler": "Straggler · one rank is slow, the others wait",
    "init": "Init / rendezvous · ranks never all arrived",
    "healthy": "Healthy · steps are still completing",
    "unknown": "Unknown · not enough evidence",
}

CLASS_SUBTITLES = {
    "A": "someone did not come",
    "B": "meetings in a different order",
    "C": "the dance steps differ",
}

# One sentence for a tooltip in the incident list and the API's label help.
CLASS_HINTS = {
    "A": "One or more ranks exited, were killed or are stuck outside any collective; "
    "the others wait for them in the same collective.",
    "B": "Every rank is alive, but they wait in different collectives (or a different op at "
    "the same sequence number): a code path differs between ranks.",
    "C": "Every rank is alive and in the same collective, nobody is missing: look at what "
    "differs between ranks (environment, NCCL's choices, the network).",
    "straggler": "The job still moves, at the pace of its slowest rank.",
    "init": "No step was completed by every rank: rendezvous or communicator set-up hangs.",
    "healthy": "Steps are still completing.",
    "unknown": "The evidence does not decide: collect more or take a second snapshot.",
}


NEXT_STEPS = {
    "A": [
        "Read the first rank that left: its log tail and exit code (137 = SIGKILL/OOM, 139 = segfault).",
        "Read dmesg on its node: the OOM killer, NVRM Xid (79 fell off the bus, 48 ECC, 74 NVLink).",
        "If the rank is alive but outside the collective: data loading, I/O, /dev/shm, a Python lock.",
    ],
    "B": [
        "Find the code path that differs: a collective under `if rank == 0:`, a data-dependent branch, "
        "variable-length batches, an exception path.",
        "The flight recorder's first unmatched sequence id names the collective and the ranks.",
    ],
    "C": [
        "Compare the environment: NCCL_* left in /etc/profile, /etc/bashrc, ~/.bashrc by an earlier "
        "debugging session; NCCL_SOCKET_IFNAME / NCCL_IB_HCA that differ between nodes.",
        "Then the network: links, IB ports (ibstat), the interfaces NCCL chose (NET/IB : Using ...).",
    ],
    "straggler": [
        "Look at the slow rank's node: data sharding, CPU contention, NUMA, throttling, ECC, storage.",
        "The others are waiting for it in collectives; fixing the slow node fixes the job.",
    ],
    "init": [
        "Check MASTER_ADDR / MASTER_PORT, DNS and the firewall; look for a duplicate node_rank.",
        "The ranks that never arrived are the ones to look at; the others wait for them.",
    ],
    "healthy": ["Steps are still completing. Take another snapshot if the job slows again."],
    "unknown": [
        "Collect more: make sure py-spy can attach (root / SYS_PTRACE) and the log globs match.",
        "Take a second snapshot some seconds later to tell slow from dead.",
    ],
}


def class_name(classification: str) -> str:
    return CLASS_NAMES.get(classification, classification)


def class_label(classification: str) -> dict[str, str]:
    """Name, subtitle and one-sentence hint of a class, for pages and the API."""
    return {
        "code": classification,
        "name": class_name(classification),
        "subtitle": CLASS_SUBTITLES.get(classification, ""),
        "hint": CLASS_HINTS.get(classification, ""),
    }


def duration(seconds: float | None) -> str:
    """A span as a person says it: 45 s, 4 min, 2 h 5 min."""
    if seconds is None:
        return "-"
    seconds = max(0.0, float(seconds))
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{round(seconds)} s"
    if seconds < 7200:
        return f"{round(seconds / 60)} min"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def progress_line(progress: Progress | None) -> str:
    """What the progress check measured, each time named: "no step for 4 min; threshold 30 s
    (3 x the 10 s step time)"."""
    if progress is None:
        return "one observation only"
    if progress.method == "two_snapshots":
        if progress.step_before is not None:
            return (
                f"compared with the previous snapshot: step {progress.step_before} → "
                f"{progress.step_after}"
            )
        return "compared with the previous snapshot"
    if progress.method != "last_step_age":
        return "one observation only"
    line = f"no step for {duration(progress.age_s)}"
    if progress.threshold_s is None:
        return line + "; no step time known to compare it with"
    line += f"; threshold {duration(progress.threshold_s)}"
    if progress.step_time_s:
        line += f" (a step takes {duration(progress.step_time_s)})"
    return line


def decision_questions(diagnosis: Diagnosis) -> list[dict[str, str]]:
    """The four questions, each with an answer and the evidence it rests on."""
    return [
        _init_or_training(diagnosis),
        _who_is_there(diagnosis),
        _last_step(diagnosis),
        _slow_or_dead(diagnosis),
    ]


def _init_or_training(d: Diagnosis) -> dict[str, str]:
    question = "Stuck at initialisation or during training?"
    if d.classification == "init" or d.last_completed_step is None:
        return {
            "question": question,
            "answer": "At initialisation: no step was completed by every rank.",
            "basis": _groups_line(d),
        }
    return {
        "question": question,
        "answer": f"During training: every rank completed step {d.last_completed_step}.",
        "basis": f"furthest step reached by any rank: {d.max_step}",
    }


def next_steps(diagnosis: Diagnosis) -> list[str]:
    """What the verdict itself asks for first (a second snapshot when nothing proves the job
    stuck), then the class's own advice."""
    first = list(diagnosis.next_steps)
    return first + [s for s in NEXT_STEPS.get(diagnosis.classification, []) if s not in first]


def _who_is_there(d: Diagnosis) -> dict[str, str]:
    question = "All ranks stuck, or only some missing?"
    missing, exited = d.missing_ranks_compact, d.exited_ranks_compact
    seen = f"{d.ranks_seen} of {d.world_size} ranks seen"
    unobserved = d.unobserved_ranks_compact
    if unobserved:
        # Absence of evidence is not evidence of absence: say so, accuse no one for it.
        seen += f"; nothing in the evidence about ranks {unobserved} (unobserved, not missing)"
    if missing or exited:
        parts = [f"missing: {missing}" if missing else "", f"exited: {exited}" if exited else ""]
        return {
            "question": question,
            "answer": "Some did not come — " + "; ".join(p for p in parts if p) + ".",
            "basis": seen,
        }
    outside = [g for g in d.stack_groups if g.kind is not GroupKind.COLLECTIVE]
    if outside and len(d.stack_groups) > 1:
        group = outside[0]
        return {
            "question": question,
            "answer": f"All present, but {_ranks_are(group)} outside the collective "
            f"({group.frame}).",
            "basis": _groups_line(d),
        }
    return {
        "question": question,
        "answer": "All ranks are present.",
        "basis": f"{seen}; {_groups_line(d)}",
    }


def _last_step(d: Diagnosis) -> dict[str, str]:
    question = "What was the last completed step doing?"
    fr = d.flight_recorder.first_mismatch if d.flight_recorder else None
    stuck = d.watchdog.stuck_collective if d.watchdog else None
    if fr:
        basis = f"flight recorder: group {fr.pg} collective #{fr.seq}"
    elif stuck:
        seq = f" #{stuck.seq}" if stuck.seq is not None else ""
        basis = f"watchdog: {stuck.op or 'collective'}{seq}"
    elif d.watchdog:
        basis = "watchdog: collective"
    else:
        basis = "no flight-recorder dump or watchdog line"
    groups = d.stack_groups
    doing = f"largest group of ranks is in {groups[0].frame}" if groups else "no stacks"
    return {
        "question": question,
        "answer": f"After step {d.last_completed_step}: {doing}.",
        "basis": basis,
    }


def _slow_or_dead(d: Diagnosis) -> dict[str, str]:
    question = "Slow or dead?"
    progressing = d.progress.progressing
    basis = progress_line(d.progress)
    if progressing is True:
        answer = "Slow: steps are still completing."
    elif progressing is False:
        answer = "Dead: nothing moved."
    else:
        answer = "Unknown: take a second snapshot in a few seconds and compare."
    return {"question": question, "answer": answer, "basis": basis}


def _ranks_are(group: StackGroup) -> str:
    if group.rank_count == 1:
        return f"rank {group.ranks} is"
    return f"ranks {group.ranks} are"


def _groups_line(d: Diagnosis) -> str:
    groups = d.stack_groups
    return "; ".join(f"ranks {g.ranks}: {g.frame}" for g in groups[:3]) or "no stacks"


# What a person reading `diagnose --json` needs first; the rest follows as stored.
READING_ORDER = (
    "classification",
    "summary",
    "suspect_ranks_compact",
    "suspect_ranks",
    "suspect_nodes",
    "confidence",
    "next_steps",
)


def reading_order(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis's stored form with classification, summary and suspects first
    (PostgreSQL's jsonb hands keys back by length, so the stored order is no order at all)."""
    stored = diagnosis.to_json()
    first = {k: stored[k] for k in READING_ORDER if k in stored}
    return first | {k: v for k, v in stored.items() if k not in first}
