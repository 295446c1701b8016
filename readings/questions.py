"""Each class's branch questions, answered in advance from a diagnosis with the evidence beside
it (docs/domain.md, "Diagnosis workflow"); the table of classes (`readings/classes.py`) names
each class's builder, `readings/branches.py` puts a branch together.

A question is a dict: `id`, `question`, `choices` [(value, label)], `suggested` (a value),
`basis` (why, in words) and `evidence` (quoted lines, `Evidence`).
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis.diagnosis import Diagnosis
from analysis.records import GroupKind, RankRow, StackGroup
from analysis.verdict import Quote, QuoteKind
from readings import stories
from readings.stories import DepartureCause

# Evidence lines quoted beside one question.
EVIDENCE_PER_QUESTION = 4
YES_NO = [("yes", "Yes"), ("no", "No")]


def _lines(d: Diagnosis, *, rank: int | None = None, kinds: tuple[str, ...] = ()) -> list:
    found = [
        e for e in d.evidence if (rank is None or e.rank == rank) and (not kinds or e.kind in kinds)
    ]
    return found[:EVIDENCE_PER_QUESTION]


def _group_lines(d: Diagnosis) -> list[Quote]:
    return [
        Quote(QuoteKind.STACK_GROUP, None, None, f"ranks {g.ranks}: {g.frame}")
        for g in d.stack_groups[:EVIDENCE_PER_QUESTION]
    ]


@dataclass(frozen=True)
class Suspect:
    """The first suspect rank (or the first missing one), its node and its per-rank row."""

    rank: int | None
    node: str | None
    row: RankRow | None


def suspect(d: Diagnosis) -> Suspect:
    ranks = d.suspect_ranks or d.missing_ranks
    rank = ranks[0] if ranks else None
    row = d.rank_row(rank)
    node = (row.node if row else None) or (d.suspect_nodes[0] if d.suspect_nodes else None)
    return Suspect(rank, node, row)


def healthy_rank(d: Diagnosis) -> RankRow | None:
    """A rank to compare the suspect with: alive, not a suspect, on another node if possible."""
    who = suspect(d)
    rows = [r for r in d.per_rank if not r.suspect and r.pid and r.rank != who.rank]
    other_node = [r for r in rows if r.node != who.node]
    return (other_node or rows or [None])[0]


def _who_question(d: Diagnosis, question: str) -> dict:
    who = suspect(d)
    if who.rank is None:
        choices = [("other", "A rank the console did not name (say which in the note)")]
        return _q("who", question, choices, "other", "no suspect in the verdict", [])
    where = f" on {who.node}" if who.node else ""
    choices = [
        ("suspect", f"Rank {who.rank}{where}"),
        ("other", "Another rank (say which in the note)"),
    ]
    basis = f"the verdict's suspects: ranks {d.suspect_ranks_compact or who.rank}"
    return _q("who", question, choices, "suspect", basis, _lines(d, rank=who.rank))


def _q(qid: str, question: str, choices: list, suggested: str, basis: str, evidence: list) -> dict:
    return {
        "id": qid,
        "question": question,
        "choices": choices,
        "suggested": suggested,
        "basis": basis,
        "evidence": evidence,
    }


def _slow_or_dead(d: Diagnosis) -> dict:
    progress = d.progress
    suggested = {True: "slow", False: "dead"}.get(progress.progressing, "unknown")
    if progress.method == "two_snapshots":
        basis = "compared with the previous snapshot"
    elif progress.method == "last_step_age":
        basis = f"last step {progress.age_s} s ago, stuck after {progress.threshold_s} s"
    else:
        basis = "one observation only: a second snapshot tells"
    choices = [
        ("slow", "Slow: steps still complete"),
        ("dead", "Dead: nothing moves"),
        ("unknown", "Not known yet"),
    ]
    return _q(
        "slow_or_dead",
        "Slow or dead?",
        choices,
        suggested,
        basis,
        _lines(d, kinds=(QuoteKind.PROGRESS,)),
    )


def _cause_basis(cause: DepartureCause) -> str:
    if cause.exit_code is not None:
        return f"rank {cause.rank}: exit code {cause.exit_code}"
    kinds = sorted({e.kind for e in cause.evidence})
    return f"evidence kinds: {', '.join(kinds) or 'none'}"


def a_questions(d: Diagnosis) -> list[dict]:
    cause = stories.departure_cause(d)
    waiting = [g for g in d.stack_groups if g.kind is GroupKind.COLLECTIVE]
    biggest = max(waiting, key=lambda g: g.rank_count) if waiting else None
    others = d.world_size - len(d.suspect_ranks)
    together = biggest is not None and biggest.rank_count >= others > 0
    return [
        _who_question(d, "Which rank left or stalled first?"),
        _q(
            "why",
            "Why did it leave?",
            [(key, words[:1].upper() + words[1:]) for key, words in stories.CAUSES.items()],
            cause.key,
            _cause_basis(cause),
            list(cause.evidence[:EVIDENCE_PER_QUESTION]),
        ),
        _q(
            "others_wait",
            "Are the other ranks waiting for it in the same collective?",
            YES_NO,
            "yes" if together else "no",
            f"ranks {biggest.ranks} in {biggest.frame}" if biggest else "no collective group",
            _group_lines(d),
        ),
        _slow_or_dead(d),
    ]


def _odd_group(d: Diagnosis) -> StackGroup | None:
    """The stack group holding the first suspect (B: the rank that left the common order)."""
    suspects = set(d.suspect_ranks)
    return next((g for g in d.stack_groups if suspects & set(g.rank_list)), None)


def _call_site(group: StackGroup | None) -> str:
    """The first frame of the job's own code in a stack (under torch's wrappers)."""
    if group is None:
        return "unknown"
    for frame in group.stack:
        if "torch/" not in frame and "c10d" not in frame:
            return frame
    return group.frame or "unknown"


def _stack_lines(group: StackGroup | None) -> list[Quote]:
    frames = group.stack[:EVIDENCE_PER_QUESTION] if group else ()
    return [Quote(QuoteKind.STACK, None, None, frame) for frame in frames]


def b_questions(d: Diagnosis) -> list[dict]:
    mismatch = d.flight_recorder.first_mismatch if d.flight_recorder else None
    groups = d.stack_groups
    odd = _odd_group(d)
    if mismatch:
        basis = f"flight recorder: group {mismatch.pg} collective #{mismatch.seq}"
    else:
        basis = f"{len(groups)} stack groups"
    shown = _lines(
        d, kinds=(QuoteKind.FLIGHT_RECORDER, QuoteKind.COLLECTIVE, QuoteKind.WATCHDOG)
    ) or _group_lines(d)
    code_paths = [
        ("rank_branch", "A collective under a rank-dependent branch (if rank == 0:)"),
        ("data_branch", "A data-dependent branch or variable-length batches"),
        ("exception", "An exception path taken on some ranks"),
        ("other", "Something else (say what in the note)"),
    ]
    single = len(d.suspect_ranks) == 1
    return [
        _q(
            "different",
            "Do the ranks run different collectives (or one from different places)?",
            YES_NO,
            "yes" if mismatch or len(groups) > 1 else "no",
            basis,
            shown,
        ),
        _who_question(d, "Which rank left the others' order?"),
        _q(
            "code_path",
            "What code path made it differ?",
            code_paths,
            "rank_branch" if single else "data_branch",
            f"the odd ranks' call site: {_call_site(odd)}",
            _stack_lines(odd),
        ),
        _slow_or_dead(d),
    ]


def _env_lines(d: Diagnosis, *, prefix: str = "") -> list[Quote]:
    lines = []
    for diff in d.real_env_diffs:
        if not diff.name.startswith(prefix):
            continue
        values = "; ".join(f"{v.value} on ranks {v.ranks}" for v in diff.values[:3])
        lines.append(Quote(QuoteKind.ENV_DIFF, None, None, f"{diff.name}: {values}"))
    return lines[:EVIDENCE_PER_QUESTION]


def c_questions(d: Diagnosis) -> list[dict]:
    groups = d.stack_groups
    together = not d.missing_ranks and len(groups) == 1
    env, nccl = _env_lines(d), _lines(d, kinds=(QuoteKind.NCCL_CONFIG, QuoteKind.NCCL_WARN))
    differs = "env" if env else "nccl" if nccl else "network"
    shell = d.shell_init
    shell_lines = [
        Quote(QuoteKind.SHELL_INIT, s.node, None, s.line) for s in shell[:EVIDENCE_PER_QUESTION]
    ]
    what = [
        ("env", "Environment variables (NCCL_*, TORCH_*, CUDA_*)"),
        ("nccl", "What NCCL chose (version, transport, interface)"),
        ("network", "The network (links, IB ports)"),
        ("nothing", "Nothing found yet"),
    ]
    return [
        _q(
            "same_collective",
            "Are all ranks alive and in the same collective?",
            YES_NO,
            "yes" if together else "no",
            f"{d.ranks_seen} of {d.world_size} ranks seen, {len(groups)} groups",
            _group_lines(d),
        ),
        _q(
            "what_differs",
            "What differs between the ranks?",
            what,
            differs,
            f"{len(env)} variables differ",
            env + nccl,
        ),
        _q(
            "shell_init",
            "Was it set by a shell start-up file (/etc/profile, ~/.bashrc)?",
            YES_NO,
            "yes" if shell else "no",
            f"{len(shell)} NCCL_ lines in shell start-up files",
            shell_lines,
        ),
        _slow_or_dead(d),
    ]


_DATA_WORDS = ("load", "data", "read", "next", "batch", "fetch", "io")


def straggler_questions(d: Diagnosis) -> list[dict]:
    who = suspect(d)
    frame = who.row.frame if who.row else ""
    where = "data" if any(word in frame.lower() for word in _DATA_WORDS) else "unknown"
    places = [
        ("data", "Data loading or I/O"),
        ("cpu", "CPU contention, NUMA, throttling"),
        ("gpu", "The GPU (ECC, clocks, heat)"),
        ("unknown", "Not known yet"),
    ]
    return [
        _q(
            "progressing",
            "Is the job still progressing?",
            YES_NO,
            "no" if d.progress.progressing is False else "yes",
            d.progress.method or "no progress measure",
            _lines(d, kinds=(QuoteKind.PROGRESS, QuoteKind.STEP_TIME)),
        ),
        _who_question(d, "Which rank is slow?"),
        _q(
            "where_time",
            "Where does the slow rank spend its time?",
            places,
            where,
            f"its stack: {frame or 'not collected'}",
            _lines(
                d,
                rank=who.rank,
                kinds=(
                    QuoteKind.SLOW_RANK,
                    QuoteKind.STEP_TIME,
                    QuoteKind.STACK,
                    QuoteKind.GPU,
                ),
            ),
        ),
    ]


def init_questions(d: Diagnosis) -> list[dict]:
    master = _env_lines(d, prefix="MASTER_")
    return [
        _q(
            "any_step",
            "Did any step complete?",
            YES_NO,
            "no" if d.last_completed_step is None else "yes",
            f"last step completed by every rank: {d.last_completed_step}",
            _group_lines(d),
        ),
        _who_question(d, "Which ranks never arrived at the rendezvous?"),
        _q(
            "rendezvous",
            "Do MASTER_ADDR and MASTER_PORT agree on every rank?",
            YES_NO,
            "no" if master else "yes",
            f"{len(master)} MASTER_ variables differ",
            master + _lines(d, kinds=(QuoteKind.RENDEZVOUS,)),
        ),
    ]


def other_questions(d: Diagnosis) -> list[dict]:
    return [_slow_or_dead(d)]
