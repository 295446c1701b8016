"""The post-mortem pages: the document as it stands, the Markdown editor with its live
preview (rendered here, sanitized), the versions and the diff between two of them. Everyone
reads; responders write."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import AppError
from core.roles import Role, has_role, role_required
from incidents import postmortem_saving
from incidents.markdown import render_markdown
from incidents.models import Incident, PostMortemStatus
from incidents.postmortem_text import SECTIONS, action_items_markdown
from sharing.documents import freeze_published

from . import selectors


def _incident(pk: int) -> Incident:
    return get_object_or_404(Incident.objects.select_related("cluster", "commander"), pk=pk)


def postmortem_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem: read by everyone; drafted, written, reviewed and published by
    responders (a first draft is built from the incident)."""
    incident = _incident(pk)
    editor = has_role(request.user, Role.RESPONDER)
    if request.method == "POST" and not editor:
        raise PermissionDenied("This needs the responder role.")
    page = selectors.postmortem_page(
        incident, editor=editor, data=request.POST or None, editing=request.GET.get("edit") == "1"
    )
    form = page.form
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
    return render(request, "pages/postmortem.html", page.context())


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
    old, new = _number(request.GET.get("a")), _number(request.GET.get("b"))
    page = selectors.postmortem_versions_page(_incident(pk), old=old, new=new)
    if page is None:
        raise Http404("No post-mortem has been written yet.")
    if page.refused:
        messages.error(request, page.refused)
    return render(request, "pages/postmortem_versions.html", page.context())


def _number(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None
