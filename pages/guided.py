"""The guided workflow's views: every answer a timeline event, the next actions as buttons
that do the thing (the panel itself, the branch of the class the responders settled on, each
question pre-answered from the stored diagnosis with its evidence, is read with the incident
page: pages/selectors.guided_panel).

Its evidence pages (two environments side by side: pages/environment_page.py; a rank's
lines: pages/rank_page.py) are read from the artifacts already collected, masked, and shown
to responders only.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from analysis.diagnosis import Diagnosis
from collectors.models import Snapshot
from core.errors import AppError
from core.roles import Role, role_required
from incidents.guided import guided_answer_record, guided_state
from incidents.models import Incident, Status
from incidents.services import InvalidTransition, incident_change_status

from .environment_page import environment_page
from .rank_page import rank_evidence_page


def _snapshot(pk: int, snapshot_pk: int) -> Snapshot:
    """Read as the incident page reads it: the diagnosis without its per-rank table (the
    guided panel's questions are the page's; a rank's row is found by itself)."""
    return get_object_or_404(
        Snapshot.objects.for_pages().select_related("incident", "incident__cluster"),
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


@role_required(Role.RESPONDER)
def guided_rank(request: HttpRequest, pk: int, snapshot_pk: int, rank: int) -> HttpResponse:
    """Everything the snapshot holds about one rank, each line with its source."""
    page = rank_evidence_page(_snapshot(pk, snapshot_pk), rank)
    return render(request, "pages/guided_rank.html", page.context())


@role_required(Role.RESPONDER)
def guided_env(request: HttpRequest, pk: int, snapshot_pk: int) -> HttpResponse:
    """The suspect rank's environment beside a healthy rank's, on another node if possible."""
    page = environment_page(_snapshot(pk, snapshot_pk))
    return render(request, "pages/guided_env.html", page.context())
