"""Pages of what leaves the console: the share links of an incident (list, create, revoke),
the shared page itself (logged-out), the Markdown export and the print page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from core.clients import client_ip
from core.downloads import disposition
from core.errors import AppError
from core.roles import Role, has_role, role_required
from incidents.models import Incident

from . import selectors, services
from .documents import Document, document_markdown
from .forms import ShareLinkForm
from .models import ShareLink


def _incident(pk: int) -> Incident:
    return get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)


def share_links(request: HttpRequest, pk: int) -> HttpResponse:
    """The incident's share links with every view; responders create new ones here."""
    incident = _incident(pk)
    can_share = has_role(request.user, Role.RESPONDER)
    form = ShareLinkForm(request.POST or None)
    created = None
    if request.method == "POST":
        if not can_share:
            raise PermissionDenied("This needs the responder role.")
        if form.is_valid():
            try:
                link, token = services.share_link_create(
                    incident=incident, by=request.user, **form.cleaned_data
                )
            except AppError as exc:
                messages.error(request, str(exc))
            else:
                # Shown in this answer only: the token is not stored anywhere.
                created = {"link": link, "url": request.build_absolute_uri(f"/s/{token}/")}
                form = ShareLinkForm()
    page = selectors.share_links_page(incident, can_share=can_share, form=form, created=created)
    response = render(request, "sharing/links.html", page.context())
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@role_required(Role.RESPONDER)
def share_link_revoke(request: HttpRequest, pk: int, link_pk: int) -> HttpResponse:
    links = ShareLink.objects.select_related("incident")
    link = get_object_or_404(links, pk=link_pk, incident_id=pk)
    services.share_link_revoke(link=link, by=request.user)
    messages.success(request, "Link revoked: it now answers “no longer available”.")
    return redirect("sharing:links", pk=pk)


@login_not_required
@require_GET
def shared(request: HttpRequest, token: str) -> HttpResponse:
    """The shared post-mortem. Every refusal looks the same: one neutral page, 404."""
    ip = client_ip(request)
    if not services.share_hit_allowed(ip):
        return render(request, "sharing/gone.html", {"busy": True}, status=429)
    link = services.share_link_open(
        token=token, ip=ip, user_agent=request.headers.get("User-Agent", "")
    )
    page = selectors.shared_page(link) if link else None
    if page is None:
        return render(request, "sharing/gone.html", {}, status=404)
    return render(request, "sharing/shared.html", page.context())


def _document_of(request: HttpRequest, pk: int) -> Document:
    evidence = request.GET.get("evidence") == "1"
    doc = selectors.postmortem_document(_incident(pk), evidence=evidence)
    if doc is None:
        raise Http404("No post-mortem has been written yet.")
    return doc


def export_markdown(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem as it stands, as a Markdown file."""
    doc = _document_of(request, pk)
    response = HttpResponse(document_markdown(doc), content_type="text/markdown; charset=utf-8")
    filename = f"{doc.incident.reference}-postmortem-v{doc.number}.md"
    response["Content-Disposition"] = disposition(filename)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def print_page(request: HttpRequest, pk: int) -> HttpResponse:
    """The post-mortem as it stands, laid out for paper (or a PDF)."""
    return render(request, "sharing/print.html", {"doc": _document_of(request, pk)})
