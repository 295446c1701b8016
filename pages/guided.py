"""The guided workflow on the incident page: the branch of the class the responders settled
on (else the verdict's), each question pre-answered from the stored diagnosis with its
evidence, every answer a timeline event, and the next actions as buttons that do the thing.

Raw evidence shown here (two environments side by side; a rank's lines: pages/rank_page.py)
is read from the artifacts already collected, masked, and shown to responders only.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from analysis.diagnosis import Diagnosis
from analysis.records import RankRow
from collectors.models import Artifact, Snapshot
from core.errors import AppError
from core.roles import Role, has_role, role_required
from hangdesk.masking import mask_environment
from incidents.guided import (
    Reasked,
    Standing,
    answer_value,
    guided_answer_record,
    guided_state,
)
from incidents.models import Incident, Status, TimelineEvent
from incidents.services import InvalidTransition, incident_change_status
from readings import guide, questions

# Variables that differ per rank by design: shown, never counted as a difference.
PER_RANK_VARIABLES = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "CUDA_VISIBLE_DEVICES",
        "TORCHELASTIC_ERROR_FILE",
        "HOSTNAME",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_PROCID",
        "SLURM_LOCALID",
    }
)


def guided_context(
    incident: Incident, snapshot: Snapshot | None, events: list[TimelineEvent], user
) -> dict | None:
    """What the guided panel shows, or None before a snapshot has a diagnosis."""
    diagnosis = snapshot.read_diagnosis() if snapshot is not None else None
    if diagnosis is None:
        return None
    state = guided_state(events, snapshot.pk, diagnosis)
    branch, answers = state["branch"], state["answers"]
    questions = []
    for q in branch["questions"]:
        labels = dict(q["choices"])
        found = answers.get(q["id"])
        questions.append(
            {
                **q,
                "suggested_label": labels.get(q["suggested"], q["suggested"]),
                "evidence": q["evidence"],  # the diagnosis', masked as it was stored
                "answer": found if isinstance(found, Standing) else None,
                "reasked": found if isinstance(found, Reasked) else None,
                "selected": answer_value(found, q),
            }
        )
    return {
        "incident": incident,
        "snapshot": snapshot,
        "branch": branch,
        "call": state["call"],
        "class_name": guide.class_name(state["classification"]),
        "questions": questions,
        "answered": sum(1 for q in questions if q["answer"]),
        "carried": sum(1 for q in questions if q["answer"] and q["answer"].carried_from),
        "can_respond": has_role(user, Role.RESPONDER) and incident.status != Status.CLOSED,
        "can_resolve": Status.RESOLVED in dict(incident.next_statuses()),
    }


def _snapshot(pk: int, snapshot_pk: int) -> Snapshot:
    return get_object_or_404(
        Snapshot.objects.select_related("incident", "incident__cluster"),
        pk=snapshot_pk,
        incident_id=pk,
    )


@require_POST
@role_required(Role.RESPONDER)
def guided_answer(request: HttpRequest, pk: int, snapshot_pk: int) -> HttpResponse:
    """Record the answer chosen for a question: the pre-answer (a confirmation) or another
    choice (an override). What is recorded is the submitted choice; `action=confirm` without
    one (the API's short form) confirms the pre-answer."""
    snapshot = _snapshot(pk, snapshot_pk)
    incident = snapshot.incident
    events = list(incident.events.order_by("at", "pk"))
    state = guided_state(events, snapshot.pk, snapshot.read_diagnosis() or Diagnosis.empty())
    classification = state["classification"]
    qid = request.POST.get("q", "")
    question = next((q for q in state["branch"]["questions"] if q["id"] == qid), None)
    if question is None:
        messages.error(request, "That question is not in this branch any more; reload the page.")
        return redirect(f"{incident.get_absolute_url()}#guided")
    answer = request.POST.get("answer", "")
    if not answer and request.POST.get("action") == "confirm":
        answer = question["suggested"]
    if answer not in dict(question["choices"]):
        messages.error(request, "Choose one of the answers offered.")
    else:
        try:
            guided_answer_record(
                incident=incident,
                by=request.user,
                snapshot_id=snapshot.pk,
                branch=classification,
                question=question,
                answer=answer,
                note=request.POST.get("note", ""),
            )
        except AppError as exc:  # a closed incident is read-only
            messages.error(request, str(exc))
    return redirect(f"{incident.get_absolute_url()}#guided-{question['id']}")


@require_POST
@role_required(Role.RESPONDER)
def guided_resolve(request: HttpRequest, pk: int) -> HttpResponse:
    """The branch's last button: mark the incident resolved, then open the post-mortem."""
    incident = get_object_or_404(Incident, pk=pk)
    if Status.RESOLVED in dict(incident.next_statuses()):
        try:
            incident_change_status(
                incident=incident,
                to_status=Status.RESOLVED,
                by=request.user,
                note=request.POST.get("note", "")[:400] or "resolved from the guided workflow",
            )
        except InvalidTransition as exc:
            messages.error(request, str(exc))
            return redirect(incident)
    return redirect("pages:postmortem", pk=incident.pk)


def _artifacts(snapshot: Snapshot, node: str, *, prefix: str = "", name: str = "") -> list:
    artifacts = Artifact.objects.filter(collection__snapshot=snapshot, collection__node_name=node)
    if name:
        artifacts = artifacts.filter(name=name)
    elif prefix:
        artifacts = artifacts.filter(name__startswith=prefix)
    return list(artifacts.order_by("name"))


def _environ(snapshot: Snapshot, row: RankRow | None) -> dict[str, str] | None:
    if row is None or not row.node or not row.pid:
        return None
    found = _artifacts(snapshot, row.node, name=f"environ/{row.pid}")
    if not found:
        return None
    text = found[0].content.decode("utf-8", "replace")
    env = dict(entry.split("=", 1) for entry in text.split("\0") if "=" in entry)
    return mask_environment(env)


def env_rows(suspect: dict[str, str], healthy: dict[str, str]) -> list[dict]:
    """One row per variable: both values (masked), whether they differ, and whether they
    differ by design (RANK, LOCAL_RANK, ...). Differences first."""
    rows = []
    for name in sorted(set(suspect) | set(healthy)):
        a, b = suspect.get(name), healthy.get(name)
        per_rank = name in PER_RANK_VARIABLES
        rows.append(
            {"name": name, "suspect": a, "healthy": b, "differs": a != b and not per_rank,
             "per_rank": per_rank}
        )  # fmt: skip
    return sorted(rows, key=lambda r: (not r["differs"], r["name"]))


@role_required(Role.RESPONDER)
def guided_env(request: HttpRequest, pk: int, snapshot_pk: int) -> HttpResponse:
    """The suspect rank's environment beside a healthy rank's, on another node if possible."""
    snapshot = _snapshot(pk, snapshot_pk)
    diagnosis = snapshot.read_diagnosis() or Diagnosis.empty()
    who = questions.suspect(diagnosis)
    healthy = questions.healthy_rank(diagnosis)
    suspect_env = _environ(snapshot, who.row)
    healthy_env = _environ(snapshot, healthy) if healthy else None
    rows = env_rows(suspect_env or {}, healthy_env or {})
    return render(
        request,
        "pages/guided_env.html",
        {
            "incident": snapshot.incident,
            "snapshot": snapshot,
            "suspect": who,
            "healthy": healthy,
            "missing": suspect_env is None or healthy_env is None,
            "rows": rows,
            "differ_count": sum(1 for r in rows if r["differs"]),
        },
    )
