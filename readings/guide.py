"""The guided decision workflow: the four questions an SRE answers first, answered from a
diagnosis, and where to look next for each verdict (docs/domain.md)."""

from __future__ import annotations

from typing import Any

from analysis.diagnosis import Diagnosis
from analysis.progress import Progress
from analysis.records import GroupKind, StackGroup
from readings.classes import reading


def class_name(classification: str) -> str:
    return reading(classification).name


def class_label(classification: str) -> dict[str, str]:
    """Name, subtitle and one-sentence hint of a class, for pages and the API."""
    return reading(classification).label()


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
    own = reading(diagnosis.classification).next_steps
    return first + [s for s in own if s not in first]


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
