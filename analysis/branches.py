"""The guided workflow to its end: for each class, the questions of its branch, each answered
in advance from a stored diagnosis (its `to_json()`) with the evidence beside it, and the next
actions the branch ends in (docs/domain.md, "Diagnosis workflow").

A question is a dict: `id`, `question`, `choices` [(value, label)], `suggested` (a value),
`basis` (why, in words) and `evidence` (quoted lines). The responder confirms the suggestion
or picks another choice; the console records either as a timeline event.
"""

from __future__ import annotations

from typing import Any

from analysis import postmortem as story

# What the branch's buttons do (the incident page turns each into a form or a link).
SECOND_SNAPSHOT = "second_snapshot"
LOG_TAIL = "log_tail"
ENV_COMPARE = "env_compare"
RESOLVE = "resolve"

# Evidence lines quoted beside one question.
EVIDENCE_PER_QUESTION = 4
YES_NO = [("yes", "Yes"), ("no", "No")]


def _lines(d: dict, *, rank: int | None = None, kinds: tuple[str, ...] = ()) -> list[dict]:
    found = [
        e
        for e in d.get("evidence") or []
        if (rank is None or e.get("rank") == rank) and (not kinds or e.get("kind") in kinds)
    ]
    return found[:EVIDENCE_PER_QUESTION]


def _group_lines(d: dict) -> list[dict]:
    return [
        {
            "kind": "stack group",
            "node": None,
            "rank": None,
            "text": f"ranks {g['ranks']}: {g['frame']}",
        }
        for g in (d.get("stack_groups") or [])[:EVIDENCE_PER_QUESTION]
    ]


def suspect(d: dict) -> dict[str, Any]:
    """The first suspect rank, its node and its per-rank row (empty when there is none)."""
    ranks = d.get("suspect_ranks") or d.get("missing_ranks") or []
    rank = ranks[0] if ranks else None
    row = next((r for r in d.get("per_rank") or [] if r.get("rank") == rank), {})
    node = row.get("node") or (d.get("suspect_nodes") or [None])[0]
    return {"rank": rank, "node": node, "row": row}


def healthy_rank(d: dict) -> dict[str, Any] | None:
    """A rank to compare the suspect with: alive, not a suspect, on another node if possible."""
    who = suspect(d)
    rows = [
        r
        for r in d.get("per_rank") or []
        if not r.get("suspect") and r.get("pid") and r.get("rank") != who["rank"]
    ]
    other_node = [r for r in rows if r.get("node") != who["node"]]
    return (other_node or rows or [None])[0]


def _who_question(d: dict, question: str) -> dict:
    who = suspect(d)
    if who["rank"] is None:
        choices = [("other", "A rank the console did not name (say which in the note)")]
        return _q("who", question, choices, "other", "no suspect in the verdict", [])
    where = f" on {who['node']}" if who["node"] else ""
    choices = [
        ("suspect", f"Rank {who['rank']}{where}"),
        ("other", "Another rank (say which in the note)"),
    ]
    basis = f"the verdict's suspects: ranks {d.get('suspect_ranks_compact') or who['rank']}"
    return _q("who", question, choices, "suspect", basis, _lines(d, rank=who["rank"]))


def _q(qid: str, question: str, choices: list, suggested: str, basis: str, evidence: list) -> dict:
    return {
        "id": qid,
        "question": question,
        "choices": choices,
        "suggested": suggested,
        "basis": basis,
        "evidence": evidence,
    }


def _slow_or_dead(d: dict) -> dict:
    progress = d.get("progress") or {}
    progressing = progress.get("progressing")
    suggested = {True: "slow", False: "dead"}.get(progressing, "unknown")
    if progress.get("method") == "two_snapshots":
        basis = "compared with the previous snapshot"
    elif progress.get("method") == "last_step_age":
        basis = (
            f"last step {progress.get('age_s')} s ago, stuck after {progress.get('threshold_s')} s"
        )
    else:
        basis = "one observation only: a second snapshot tells"
    choices = [
        ("slow", "Slow: steps still complete"),
        ("dead", "Dead: nothing moves"),
        ("unknown", "Not known yet"),
    ]
    return _q(
        "slow_or_dead", "Slow or dead?", choices, suggested, basis, _lines(d, kinds=("progress",))
    )


def _cause_basis(cause: dict) -> str:
    if cause["exit_code"] is not None:
        return f"rank {cause['rank']}: exit code {cause['exit_code']}"
    kinds = sorted({e["kind"] for e in cause["evidence"]})
    return f"evidence kinds: {', '.join(kinds) or 'none'}"


def _branch_a(d: dict) -> list[dict]:
    cause = story.departure_cause(d)
    waiting = [g for g in d.get("stack_groups") or [] if g.get("kind") == "collective"]
    biggest = max(waiting, key=lambda g: g.get("rank_count", 0)) if waiting else None
    others = (d.get("world_size") or 0) - len(d.get("suspect_ranks") or [])
    together = bool(biggest) and biggest.get("rank_count", 0) >= others > 0
    return [
        _who_question(d, "Which rank left or stalled first?"),
        _q(
            "why",
            "Why did it leave?",
            [(key, words[:1].upper() + words[1:]) for key, words in story.CAUSES.items()],
            cause["key"],
            _cause_basis(cause),
            cause["evidence"][:EVIDENCE_PER_QUESTION],
        ),
        _q(
            "others_wait",
            "Are the other ranks waiting for it in the same collective?",
            YES_NO,
            "yes" if together else "no",
            f"ranks {biggest['ranks']} in {biggest['frame']}" if biggest else "no collective group",
            _group_lines(d),
        ),
        _slow_or_dead(d),
    ]


def _odd_group(d: dict) -> dict:
    """The stack group holding the first suspect (B: the rank that left the common order)."""
    suspects = set(d.get("suspect_ranks") or [])
    for group in d.get("stack_groups") or []:
        if suspects & set(group.get("rank_list") or []):
            return group
    return {}


def _call_site(group: dict) -> str:
    """The first frame of the job's own code in a stack (under torch's wrappers)."""
    for frame in group.get("stack") or []:
        if "torch/" not in frame and "c10d" not in frame:
            return frame
    return group.get("frame") or "unknown"


def _stack_lines(group: dict) -> list[dict]:
    frames = (group.get("stack") or [])[:EVIDENCE_PER_QUESTION]
    return [{"kind": "stack", "node": None, "rank": None, "text": frame} for frame in frames]


def _branch_b(d: dict) -> list[dict]:
    mismatch = (d.get("flight_recorder") or {}).get("first_mismatch") or {}
    groups = d.get("stack_groups") or []
    odd = _odd_group(d)
    if mismatch:
        basis = f"flight recorder: group {mismatch.get('pg')} collective #{mismatch.get('seq')}"
    else:
        basis = f"{len(groups)} stack groups"
    shown = _lines(d, kinds=("flight_recorder", "collective", "watchdog")) or _group_lines(d)
    code_paths = [
        ("rank_branch", "A collective under a rank-dependent branch (if rank == 0:)"),
        ("data_branch", "A data-dependent branch or variable-length batches"),
        ("exception", "An exception path taken on some ranks"),
        ("other", "Something else (say what in the note)"),
    ]
    single = len(d.get("suspect_ranks") or []) == 1
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


def _env_lines(d: dict, *, prefix: str = "") -> list[dict]:
    lines = []
    for diff in d.get("env_diffs") or []:
        if diff.get("expected_per_rank") or not diff.get("name", "").startswith(prefix):
            continue
        values = "; ".join(
            f"{v.get('value')} on ranks {v.get('ranks')}" for v in (diff.get("values") or [])[:3]
        )
        lines.append(
            {"kind": "env_diff", "node": None, "rank": None, "text": f"{diff['name']}: {values}"}
        )
    return lines[:EVIDENCE_PER_QUESTION]


def _branch_c(d: dict) -> list[dict]:
    groups = d.get("stack_groups") or []
    together = not d.get("missing_ranks") and len(groups) == 1
    env, nccl = _env_lines(d), _lines(d, kinds=("nccl_config", "nccl_warn"))
    differs = "env" if env else "nccl" if nccl else "network"
    shell = d.get("shell_init") or []
    shell_lines = [
        {"kind": "shell_init", "node": s.get("node"), "rank": None, "text": s.get("line", "")}
        for s in shell[:EVIDENCE_PER_QUESTION]
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
            f"{d.get('ranks_seen')} of {d.get('world_size')} ranks seen, {len(groups)} groups",
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


def _branch_straggler(d: dict) -> list[dict]:
    who = suspect(d)
    frame = (who["row"].get("frame") or "").lower()
    where = "data" if any(word in frame for word in _DATA_WORDS) else "unknown"
    progressing = (d.get("progress") or {}).get("progressing")
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
            "no" if progressing is False else "yes",
            (d.get("progress") or {}).get("method") or "no progress measure",
            _lines(d, kinds=("progress", "step_time")),
        ),
        _who_question(d, "Which rank is slow?"),
        _q(
            "where_time",
            "Where does the slow rank spend its time?",
            places,
            where,
            f"its stack: {who['row'].get('frame') or 'not collected'}",
            _lines(d, rank=who["rank"], kinds=("slow_rank", "step_time", "stack", "gpu")),
        ),
    ]


def _branch_init(d: dict) -> list[dict]:
    master = _env_lines(d, prefix="MASTER_")
    return [
        _q(
            "any_step",
            "Did any step complete?",
            YES_NO,
            "no" if d.get("last_completed_step") is None else "yes",
            f"last step completed by every rank: {d.get('last_completed_step')}",
            _group_lines(d),
        ),
        _who_question(d, "Which ranks never arrived at the rendezvous?"),
        _q(
            "rendezvous",
            "Do MASTER_ADDR and MASTER_PORT agree on every rank?",
            YES_NO,
            "no" if master else "yes",
            f"{len(master)} MASTER_ variables differ",
            master + _lines(d, kinds=("rendezvous",)),
        ),
    ]


BRANCHES = {
    "A": ("Someone did not come", _branch_a),
    "B": ("Meetings in a different order", _branch_b),
    "C": ("The dance steps differ", _branch_c),
    "straggler": ("A slow rank", _branch_straggler),
    "init": ("Stuck at start-up", _branch_init),
}


def _branch_other(d: dict) -> list[dict]:
    return [_slow_or_dead(d)]


def branch(d: dict[str, Any], classification: str) -> dict[str, Any]:
    """The branch for `classification` (the responders' call, else the verdict's): its
    questions pre-answered from `d`, and the next actions it ends in."""
    title, build = BRANCHES.get(classification, ("Not classified yet", _branch_other))
    who = suspect(d)
    healthy = healthy_rank(d)
    actions = [SECOND_SNAPSHOT]
    if who["rank"] is not None:
        actions.append(LOG_TAIL)
    if who["row"].get("pid") and healthy:
        actions.append(ENV_COMPARE)
    actions.append(RESOLVE)
    return {
        "classification": classification,
        "title": title,
        "questions": build(d),
        "actions": actions,
        "suspect": {"rank": who["rank"], "node": who["node"]},
        "healthy": {"rank": healthy["rank"], "node": healthy.get("node")} if healthy else None,
    }


def question(d: dict[str, Any], classification: str, qid: str) -> dict[str, Any] | None:
    return next((q for q in branch(d, classification)["questions"] if q["id"] == qid), None)
