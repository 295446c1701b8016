"""Snapshot pages: start one, watch it, read its evidence."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods, require_POST

from core.bodycap import body_cap
from core.downloads import disposition
from core.errors import Conflict, Invalid
from core.feedback import CHANGED_EVENT, answer, is_htmx
from core.roles import Role, role_required
from hangdesk.evidence_kinds import as_text
from hangdesk.masking import masked_artifact_text
from incidents.models import Incident

from . import audit, evidence_viewer, push, selectors, services, starts, tasks
from .bundles import BundleRefused, read_bundle_fileobj
from .models import Artifact, Snapshot
from .scheduler import JobRefused

MAX_BUNDLE_UPLOAD_BYTES = 512 * 1024 * 1024
# The form's own bytes around the file (boundaries, the CSRF field, headers).
MULTIPART_SLACK = 1 << 20


@require_POST
@role_required(Role.RESPONDER)
def snapshot_start(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    to = f"{incident.get_absolute_url()}#snapshot"
    try:
        plan = None
        if incident.cluster.uses_scheduler and incident.scheduler_job:
            # The job is read on a worker (keys, known_hosts), as when the incident opened.
            plan = tasks.job_plan_on_worker(incident.cluster, incident.scheduler_job)
        snapshot, created = starts.snapshot_start(incident=incident, by=request.user, job_plan=plan)
    except (services.SnapshotRefused, JobRefused) as exc:
        return answer(request, to=to, text=str(exc), level="error", changed=False)
    about = f"snapshot-{snapshot.pk}"
    if snapshot.waits_for_uploads:
        return _upload_token_shown(request, snapshot, created=created)
    if not created:
        text = f"Snapshot {snapshot.pk} is already running; showing it."
        return answer(request, to=to, text=text, level="info", about=about)
    return answer(request, to=to, text=f"Snapshot {snapshot.pk} started.", about=about)


def _upload_token_shown(request: HttpRequest, snapshot: Snapshot, *, created: bool):
    """A push snapshot waits for its nodes: a new upload token for this responder and the
    line the nodes run, shown once (only the token's hash is kept). Beside the button for
    htmx; as a page of its own otherwise (never through a redirect's message store)."""
    token = push.upload_token_issue(snapshot=snapshot, by=request.user)
    context = {
        "snapshot": snapshot,
        "created": created,
        "token": token,
        "command": push.upload_command(
            snapshot=snapshot, token=token, base_url=settings.HANGDESK_BASE_URL
        ),
    }
    fragment = is_htmx(request)
    template = "collectors/_upload_token.html" if fragment else "collectors/upload_token.html"
    response = render(request, template, context)
    response["Cache-Control"] = "no-store"  # the token must not stay in a cache
    if fragment:
        response["HX-Trigger"] = CHANGED_EVENT
    return response


@require_POST
@role_required(Role.RESPONDER)
def upload_token_new(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    snapshots = Snapshot.objects.select_related("incident", "cluster")
    snapshot = get_object_or_404(snapshots, pk=snapshot_pk)
    to = f"{snapshot.incident.get_absolute_url()}#snapshot"
    if not snapshot.waits_for_uploads:
        text = f"Snapshot {snapshot.pk} no longer waits for bundles."
        return answer(request, to=to, text=text, level="error", changed=False)
    return _upload_token_shown(request, snapshot, created=False)


@require_POST
@role_required(Role.RESPONDER)
def snapshot_analyse_now(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot.objects.select_related("incident"), pk=snapshot_pk)
    to = f"{snapshot.incident.get_absolute_url()}#snapshot"
    try:
        started = starts.push_analyse_now(snapshot=snapshot, by=request.user)
    except Conflict as exc:
        return answer(request, to=to, text=str(exc), level="error", changed=False)
    if not started:
        text = f"Snapshot {snapshot.pk} no longer waits: it is {snapshot.get_status_display()}."
        return answer(request, to=to, text=text, level="info", changed=True)
    text = f"Snapshot {snapshot.pk}: analysing the nodes that sent their bundle."
    return answer(request, to=to, text=text, about=f"snapshot-{snapshot.pk}")


@require_POST
@role_required(Role.RESPONDER)
def snapshot_decide(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot.objects.select_related("incident"), pk=snapshot_pk)
    classification = request.POST.get("classification", "")
    note = request.POST.get("note", "")[:400]
    to = f"{snapshot.incident.get_absolute_url()}#diagnosis"
    try:
        services.snapshot_record_decision(
            snapshot=snapshot, by=request.user, classification=classification, note=note
        )
    except Invalid as exc:
        return answer(request, to=to, text=str(exc), level="error", changed=False)
    return answer(request, to=to, text="Decision recorded.")


def snapshot_progress(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    snapshot = get_object_or_404(Snapshot, pk=snapshot_pk)
    response = render(request, "collectors/_progress.html", selectors.progress(snapshot).context())
    if request.headers.get("HX-Request") and not snapshot.is_active:
        # The snapshot finished while this page watched it: the page's live poll fetches
        # the verdict and the timeline now (the panel just rendered has nothing to poll).
        response["HX-Trigger"] = CHANGED_EVENT
    return response


def snapshot_detail(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    snapshot = get_object_or_404(
        Snapshot.objects.for_pages().select_related("incident", "cluster", "requested_by"),
        pk=snapshot_pk,
    )
    page = selectors.snapshot_page(snapshot, node=request.GET.get("node", ""))
    return render(request, "collectors/snapshot.html", page.context())


def snapshot_ranks(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    """One page of a snapshot's per-rank table, in rank order: the rows for htmx (the
    diagnosis panel pages through them), or a page of its own."""
    snapshot = get_object_or_404(
        Snapshot.objects.only("pk", "incident_id", "rank_overview"), pk=snapshot_pk
    )
    wanted = request.GET.get("page", "1")[:9]
    page = 10**9 if wanted == "last" else (int(wanted) if wanted.isdigit() else 1)
    context = selectors.rank_page(snapshot, page).context()
    if is_htmx(request):
        return render(request, "collectors/_rank_page.html", context)
    return render(request, "collectors/rank_page.html", context)


@body_cap(MAX_BUNDLE_UPLOAD_BYTES, field="bundle", what="bundle", slack=MULTIPART_SLACK)
@require_POST
@role_required(Role.RESPONDER)
def bundle_import(request: HttpRequest, pk: int) -> HttpResponse:
    incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
    upload = request.FILES.get("bundle")
    to = f"{incident.get_absolute_url()}#snapshot"
    if upload is None:
        text = "Choose a bundle file (.tar.gz) to import."
        return answer(request, to=to, text=text, level="error", changed=False)
    if upload.size > MAX_BUNDLE_UPLOAD_BYTES:
        text = f"{upload.name} is over {MAX_BUNDLE_UPLOAD_BYTES >> 20} MiB."
        return answer(request, to=to, text=text, level="error", changed=False)
    try:
        evidence = read_bundle_fileobj(upload)
        snapshot = starts.snapshot_import_bundle(
            incident=incident, evidence=evidence, by=request.user
        )
    except (BundleRefused, services.SnapshotRefused) as exc:
        text = f"Bundle {upload.name} refused: {exc}"
        return answer(request, to=to, text=text, level="error", changed=False)
    return answer(request, to=to, text=f"Imported as snapshot {snapshot.pk}; analysing.")


def raw_asked(request: HttpRequest) -> bool:
    """Evidence as collected is read only on a POST (CSRF-checked): another site can make a
    logged-in responder's browser send a GET, never this."""
    return request.method == "POST" and request.POST.get("raw") == "1"


def _raw_confirm(request: HttpRequest, what: str) -> HttpResponse | None:
    """A GET asking for raw evidence (an old link, or another site's) reads nothing: it gets
    a page with the button that asks for it by POST."""
    if request.method != "GET" or request.GET.get("raw") != "1":
        return None
    keep = {k: v for k, v in request.GET.items() if k in ("download", "line")}
    return render(request, "collectors/raw_confirm.html", {"what": what, "keep": keep})


@require_http_methods(["GET", "POST"])
@role_required(Role.RESPONDER)
def bundle_export(request: HttpRequest, snapshot_pk: int) -> HttpResponse:
    """The snapshot as a bundle, secrets masked; POST raw=1 exports it as collected. Both are
    written to the audit log."""
    snapshot = get_object_or_404(
        Snapshot.objects.select_related("incident", "cluster"), pk=snapshot_pk
    )
    confirm = _raw_confirm(request, f"the whole of snapshot {snapshot.pk} as a bundle")
    if confirm is not None:
        return confirm
    raw = raw_asked(request)
    content = selectors.snapshot_bundle(snapshot, raw=raw)
    audit.evidence_exported(request, snapshot, raw=raw, via="page")
    response = HttpResponse(content, content_type="application/gzip")
    kind = "-raw" if raw else ""
    filename = f"{snapshot.incident.reference}-snapshot-{snapshot.pk}{kind}.tar.gz"
    response["Content-Disposition"] = disposition(filename)
    return response


@require_http_methods(["GET", "POST"])
@role_required(Role.RESPONDER)
def artifact_raw(
    request: HttpRequest,
    snapshot_pk: int,
    artifact_pk: int | None = None,
    *,
    as_page: bool = False,
    quote: int | None = None,
) -> HttpResponse:
    """One artifact as text, secrets masked; POST raw=1 as collected (audited). Responders
    only: viewers read the (masked) diagnosis. Every way to read an artifact comes through
    here: the plain text (download), the viewer page (`as_page`: line numbers, the verdict's
    quoted lines marked) and a quote of the verdict (`quote`: the artifact that holds it)."""
    if quote is not None:
        artifact, line = _artifact_quoting(snapshot_pk, quote)
    else:
        artifact = get_object_or_404(
            Artifact.objects.select_related("collection"),
            pk=artifact_pk,
            collection__snapshot_id=snapshot_pk,
        )
        evidence_viewer.with_page_snapshot(artifact)
        line = None
    confirm = _raw_confirm(request, f"{artifact.name} of {artifact.collection.node_name}")
    if confirm is not None:
        return confirm
    raw = raw_asked(request)
    if raw:
        audit.raw_evidence_read(request, artifact)
        content = artifact.content
    else:
        content = masked_artifact_text(artifact.name, artifact.content)
    if as_page or quote is not None:
        text = content if isinstance(content, str) else as_text(content)
        page = evidence_viewer.artifact_page(artifact, text, raw=raw, line=line)
        return render(request, "collectors/artifact.html", page.context())
    # Shown as text, never rendered: it comes from the nodes.
    response = HttpResponse(content, content_type="text/plain; charset=utf-8")
    download = request.GET.get("download") == "1" or request.POST.get("download") == "1"
    response["Content-Disposition"] = disposition(f"{artifact.name}.txt", attachment=download)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


def _artifact_quoting(snapshot_pk: int, index: int) -> tuple[Artifact, int | None]:
    snapshot = get_object_or_404(
        Snapshot.objects.for_pages().select_related("incident"), pk=snapshot_pk
    )
    found = evidence_viewer.artifact_quoting(snapshot, index)
    if found is None:
        raise Http404("No stored artifact of that node holds this line.")
    return found
