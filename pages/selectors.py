"""Each page's one read: a typed record of everything the page shows, put together here from
the apps' selectors (the view validates, calls this, renders; templates only format)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from django.db.models import Q

from collectors import selectors as snapshot_selectors
from collectors.models import Snapshot
from core.errors import AppError
from core.roles import Role, has_role
from incidents import postmortem_draft
from incidents import selectors as incident_selectors
from incidents.forms import IncidentEditForm, IncidentFilterForm, PostMortemForm
from incidents.guided import Reasked, Standing, answer_value, guided_state
from incidents.models import (
    EventKind,
    Incident,
    PostMortem,
    PostMortemVersion,
    Status,
    TimelineEvent,
)
from incidents.postmortem_text import EDITABLE, SECTIONS
from readings import guide
from sharing.documents import Document, document

_CALLS = (EventKind.DECISION, EventKind.ANSWER)


# The incident list shows at most this many (the filters narrow it).
INCIDENTS_LISTED = 500


@dataclass(frozen=True)
class IncidentListPage:
    incidents: list[Incident]  # each with `verdict`: its newest analysed snapshot's class
    filters: IncidentFilterForm

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def incident_list_page(filters: IncidentFilterForm) -> IncidentListPage:
    """The incidents the filters choose (no status chosen: the active ones), each with its
    latest verdict, in one query."""
    chosen = filters.chosen()
    status = chosen.get("status", "")
    incidents = incident_selectors.incident_list(
        status="" if status in ("", "all") else status,
        active_only=status == "",
        severity=chosen.get("severity", ""),
        cluster=chosen.get("cluster", ""),
    )
    listed = snapshot_selectors.with_latest_verdict(incidents)[:INCIDENTS_LISTED]
    return IncidentListPage(incidents=list(listed), filters=filters)


@dataclass(frozen=True)
class LiveKeys:
    """What the page shows, as keys its live poll sends back: each region is re-rendered only
    when its own key moved (typing in the note box survives a colleague's note)."""

    version: int  # Incident.version: anything changed at all
    head: str  # status, severity, commander, the snapshot's status, the title
    verdict: str  # the snapshot, its status, the newest call on it, the diagnosed snapshot
    seen: int  # the newest timeline event the page shows


@dataclass(frozen=True)
class IncidentPage:
    incident: Incident
    snapshot: Snapshot | None  # the newest snapshot (it may still be collecting)
    diagnosed: Snapshot | None  # the snapshot whose verdict the page shows
    events: list[TimelineEvent]
    edit_form: IncidentEditForm
    live: LiveKeys
    # Read only with the evidence (the live poll leaves them out while its verdict key holds):
    progress: snapshot_selectors.ProgressPanel | None = None
    view: snapshot_selectors.VerdictView | None = None
    decision: Standing | Reasked | None = None  # the responders' call standing on `diagnosed`
    guided: GuidedPanel | None = None

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def incident_page(
    incident: Incident, user=None, *, shown_verdict: str | None = None
) -> IncidentPage:
    """What the incident page shows. With `shown_verdict` (the live poll: the verdict's key on
    the open page), the snapshots are first read only as far as the live keys need (no
    diagnosis JSON), and the evidence (the verdict, chart, progress table, guided panel) only
    if that key moved, for the same snapshots the keys were made from."""
    cheap = shown_verdict is not None
    snapshot, diagnosed = _snapshots(incident, for_page=not cheap)
    events = list(incident_selectors.incident_timeline(incident))
    page = IncidentPage(
        incident=incident,
        snapshot=snapshot,
        diagnosed=diagnosed,
        events=events,
        edit_form=IncidentEditForm(instance=incident),
        live=_live_keys(incident, snapshot, diagnosed, events),
    )
    if page.live.verdict == shown_verdict:
        return page
    if cheap:  # the verdict's key moved: its snapshots again, with their diagnosis
        by_pk = Snapshot.objects.for_pages().in_bulk([s.pk for s in (snapshot, diagnosed) if s])
        snapshot = by_pk.get(snapshot.pk) if snapshot else None
        diagnosed = by_pk.get(diagnosed.pk) if diagnosed else None
    guided = guided_panel(incident, diagnosed, events, user) if diagnosed else None
    return replace(
        page,
        snapshot=snapshot,
        diagnosed=diagnosed,
        progress=snapshot_selectors.progress(snapshot) if snapshot else None,
        view=snapshot_selectors.diagnosis_view(diagnosed) if diagnosed else None,
        # The verdict's head and the guided panel show the same call, read once.
        decision=guided.call if guided else None,
        guided=guided,
    )


@dataclass(frozen=True)
class GuidedPanel:
    """The guided workflow's panel on the incident page: the branch of the class the
    responders settled on (else the verdict's), each question pre-answered from the stored
    diagnosis with its evidence, and what the user may do."""

    incident: Incident
    snapshot: Snapshot
    branch: dict  # readings.branches: its title, questions and actions
    call: Standing | Reasked | None  # the responders' call standing on the snapshot
    class_name: str
    questions: list[dict]  # each with its answer standing, or re-asked, and the choice shown
    answered: int
    carried: int  # answers standing from an earlier snapshot
    can_respond: bool
    can_resolve: bool


def guided_panel(
    incident: Incident, snapshot: Snapshot | None, events: list[TimelineEvent], user
) -> GuidedPanel | None:
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
    return GuidedPanel(
        incident=incident,
        snapshot=snapshot,
        branch=branch,
        call=state["call"],
        class_name=guide.class_name(state["classification"]),
        questions=questions,
        answered=sum(1 for q in questions if q["answer"]),
        carried=sum(1 for q in questions if q["answer"] and q["answer"].carried_from),
        can_respond=has_role(user, Role.RESPONDER) and incident.status != Status.CLOSED,
        can_resolve=Status.RESOLVED in dict(incident.next_statuses()),
    )


def _snapshots(incident: Incident, *, for_page: bool) -> tuple[Snapshot | None, Snapshot | None]:
    """The newest snapshot and the one whose verdict the page shows; `for_page`: with the
    diagnosis (without its per-rank table), else without it (only whether there is one)."""
    snapshots = incident.snapshots.order_by("-started_at", "-pk")
    if for_page:  # the verdict without the per-rank table (its overview stands in)
        snapshots = snapshots.for_pages()
    else:
        snapshots = snapshots.defer("diagnosis").annotate(has_diagnosis=Q(diagnosis__isnull=False))
    snapshot = snapshots.first()
    if snapshot is None or snapshot.has_diagnosis:
        return snapshot, snapshot
    # While a new snapshot collects, the last verdict stays on the page (and says which).
    diagnosed = snapshot_selectors.latest_diagnosed_snapshot(
        incident, for_page=for_page, keys_only=not for_page
    )
    return snapshot, diagnosed


def _live_keys(
    incident: Incident,
    snapshot: Snapshot | None,
    diagnosed: Snapshot | None,
    events: list[TimelineEvent],
) -> LiveKeys:
    # Any decision or guided answer (this snapshot's, or one carried to it) moves the verdict's key.
    answered = max((e.pk for e in events if e.kind in _CALLS), default=0)
    return LiveKeys(
        version=incident.version,
        head=f"{incident.status}:{incident.severity}:{incident.commander_id or 0}:"
        f"{snapshot.status if snapshot else '-'}:{incident.title}",
        verdict=f"{snapshot.pk}:{snapshot.status}:{answered}:{diagnosed.pk if diagnosed else 0}"
        if snapshot
        else "-",
        seen=events[-1].pk if events else 0,
    )


# --- the post-mortem pages (pages/postmortems.py) ---------------------------------------------


@dataclass(frozen=True)
class PostmortemPage:
    """The post-mortem page: the document as it stands, its versions (counted on the page),
    and for responders the editor (its sections in the document's order)."""

    incident: Incident
    postmortem: PostMortem | None
    versions: list[PostMortemVersion]
    doc: Document | None
    form: PostMortemForm | None
    sections: tuple[tuple[str, str], ...]
    editing: bool  # the editor opens (after a refused publish, or asked for)

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def postmortem_page(
    incident: Incident, *, editor: bool = False, data=None, editing: bool = False
) -> PostmortemPage:
    """`editor` (a responder): with the editor's form, bound to `data` when posted, on the
    stored post-mortem or, before the first save, on a first draft built from the incident."""
    postmortem = PostMortem.objects.filter(incident=incident).select_related("written_by").first()
    versions = (
        list(postmortem.versions.select_related("author").order_by("-number")) if postmortem else []
    )
    form = None
    if editor:
        form = PostMortemForm(data, instance=postmortem or _draft(incident))
    return PostmortemPage(
        incident=incident,
        postmortem=postmortem,
        versions=versions,
        doc=document(incident, postmortem) if postmortem else None,
        form=form,
        sections=SECTIONS,
        editing=editing,
    )


def _draft(incident: Incident) -> PostMortem:
    """A first draft (unsaved) built from the incident and its latest verdict."""
    # Read as a page reads it (the diagnosis without its per-rank table); of the table the
    # draft needs only when the last step line was written.
    snapshot = snapshot_selectors.latest_diagnosed_snapshot(incident, for_page=True)
    if snapshot is None:
        return postmortem_draft.postmortem_draft(incident)
    return postmortem_draft.postmortem_draft(
        incident,
        diagnosis=snapshot.read_diagnosis(),
        diagnosed_at=snapshot.finished_at,
        last_step_at=snapshot_selectors.last_step_at(snapshot),
    )


@dataclass(frozen=True)
class PostmortemVersionsPage:
    """Every saved version (who, when, status) and the diff between two of them."""

    incident: Incident
    postmortem: PostMortem
    versions: list[PostMortemVersion]
    diff: dict | None  # incidents.selectors.postmortem_version_diff
    refused: str  # why the two versions asked for cannot be compared ("" when they can)
    editable: tuple[str, ...]

    def context(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def postmortem_versions_page(
    incident: Incident, *, old: int | None, new: int | None
) -> PostmortemVersionsPage | None:
    """None before the first save. `new` defaults to the newest version, `old` to the one
    before `new`."""
    postmortem = PostMortem.objects.filter(incident=incident).first()
    if postmortem is None:
        return None
    versions = list(postmortem.versions.select_related("author").order_by("-number"))
    newest = postmortem.version
    new = newest if new is None else new
    old = max(new - 1, 1) if old is None else old
    diff, refused = None, ""
    if versions and newest > 1:
        try:
            diff = incident_selectors.postmortem_version_diff(postmortem, old, new)
        except AppError as exc:
            refused = str(exc)
    return PostmortemVersionsPage(
        incident=incident,
        postmortem=postmortem,
        versions=versions,
        diff=diff,
        refused=refused,
        editable=EDITABLE,
    )
