"""The post-mortem pages: the document as it stands, the Markdown editor with its live
preview (rendered here, sanitized), the versions and the diff between two of them. Everyone
reads; responders write."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from collectors import selectors as snapshot_selectors
from core.errors import AppError
from core.roles import Role, has_role, role_required
from incidents import postmortem_draft, postmortem_saving
from incidents import selectors as incident_selectors
from incidents.forms import PostMortemForm
from incidents.markdown import render_markdown
from incidents.models import Incident, PostMortem, PostMortemStatus
from incidents.postmortem_text import EDITABLE, SECTIONS, action_items_markdown
from sharing.documents import document, freeze_published


def _incident(pk: int) -> Incident:
    return get_object_or_404(Incident.objects.select_related("cluster", "commander"), pk=pk)


def postmortem_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem: read by everyone; drafted, written, reviewed and published by
    responders (a first draft is built from the incident)."""
    incident = _incident(pk)
    context = incident_selectors.postmortem_view(incident)
    postmortem = context["postmortem"]
    form = None
    if has_role(request.user, Role.RESPONDER):
        instance = postmortem or _draft(incident)
        form = PostMortemForm(request.POST or None, instance=instance)
        if request.method == "POST" and form.is_valid():
            try:
                saved = postmortem_saving.postmortem_save(
                    incident=incident, by=request.user, **form.cleaned_data
                )
                if saved.status == PostMortemStatus.PUBLISHED:
                    # What a share link will show: the verdict, chart and notes as of now.
                    freeze_published(incident, saved)
            except postmortem_saving.PublishRefused as exc:
                # The text is kept as a version: the editor opens on it, saying why.
                messages.error(request, str(exc))
                url = reverse("pages:postmortem", args=[incident.pk])
                return redirect(f"{url}?edit=1#postmortem-editor")
            except AppError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, "Post-mortem saved.")
                return redirect("pages:postmortem", pk=incident.pk)
    elif request.method == "POST":
        raise PermissionDenied("This needs the responder role.")
    context.update(
        {
            "incident": incident,
            "form": form,
            "doc": document(incident, postmortem) if postmortem else None,
            "sections": SECTIONS,
            "editing": request.GET.get("edit") == "1",
        }
    )
    return render(request, "pages/postmortem.html", context)


def _draft(incident: Incident) -> PostMortem:
    snapshot = snapshot_selectors.latest_diagnosed_snapshot(incident)
    if snapshot is None:
        return postmortem_draft.postmortem_draft(incident)
    return postmortem_draft.postmortem_draft(
        incident, diagnosis=snapshot.read_diagnosis(), diagnosed_at=snapshot.finished_at
    )


@require_POST
@role_required(Role.RESPONDER)
def postmortem_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """The written sections as they will read, from the editor's unsaved text (htmx)."""
    get_object_or_404(Incident, pk=pk)
    sections = []
    for name, title in SECTIONS:
        text = request.POST.get(name, "")[: 2 * 20_000]
        markdown = action_items_markdown(text) if name == "action_items" else text
        sections.append({"title": title, "html": render_markdown(markdown), "empty": not text})
    return render(request, "pages/_postmortem_preview.html", {"sections": sections})


def postmortem_versions(request: HttpRequest, pk: int) -> HttpResponse:
    """Every saved version (who, when, status) and the diff between two of them."""
    incident = _incident(pk)
    postmortem = get_object_or_404(PostMortem, incident=incident)
    versions = list(postmortem.versions.select_related("author").order_by("-number"))
    diff = None
    newest = postmortem.version
    new = _number(request.GET.get("b"), newest)
    old = _number(request.GET.get("a"), max(new - 1, 1))
    if versions and newest > 1:
        try:
            diff = incident_selectors.postmortem_version_diff(postmortem, old, new)
        except AppError as exc:
            messages.error(request, str(exc))
    return render(
        request,
        "pages/postmortem_versions.html",
        {
            "incident": incident,
            "postmortem": postmortem,
            "versions": versions,
            "diff": diff,
            "editable": EDITABLE,
        },
    )


def _number(text: str | None, default: int) -> int:
    try:
        return int(text) if text else default
    except ValueError:
        return default
