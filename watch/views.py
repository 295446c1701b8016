"""The watch on the cluster page: its panel (loaded and refreshed by htmx), its settings, the
heartbeat token and preflight. Everyone reads; responders change."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters.models import Cluster
from core.clients import client_ip
from core.errors import AppError
from core.roles import Role, has_role, role_required

from . import configure, heartbeats, limits, selectors
from .forms import PAGER_FIELDS


def watch_panel(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    return render(request, "watch/_panel.html", selectors.watch_panel(cluster).context())


def watch_settings_form(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    page = selectors.watch_settings(
        cluster,
        responder=has_role(request.user, Role.RESPONDER),
        admin=has_role(request.user, Role.ADMIN),
    )
    return render(request, "watch/_settings.html", page.context())


@require_POST
@role_required(Role.RESPONDER)
def watch_settings(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    admin = has_role(request.user, Role.ADMIN)
    configure.watch_for(cluster)  # a save, even a refused one, leaves the cluster a watch
    page = selectors.watch_settings(cluster, responder=True, admin=admin, data=request.POST)
    form = page.form
    if form.is_valid():
        fields = dict(form.cleaned_data)
        if not admin:
            fields.pop("webhook_url")  # shown to responders, set by admins
        for name in PAGER_FIELDS:  # empty (or not an admin's): the key set stays
            if not admin or not fields.get(name):
                fields.pop(name, None)
        try:
            watch = configure.watch_configure(
                cluster=cluster, by=request.user, ip=client_ip(request), **fields
            )
        except AppError as exc:
            form.add_error(None, str(exc))
        else:
            state = "on" if watch.enabled else "off"
            messages.success(request, f"Watch of {cluster.name} is {state}.")
            return redirect(cluster)
    return render(request, "watch/settings_page.html", page.context(), status=400)


@require_POST
@role_required(Role.RESPONDER)
def heartbeat_token(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    token = heartbeats.heartbeat_token_issue(
        watch=configure.watch_for(cluster), by=request.user, ip=client_ip(request)
    )
    response = render(request, "watch/token.html", {"cluster": cluster, "token": token})
    response["Cache-Control"] = "no-store"
    return response


@require_POST
@role_required(Role.RESPONDER)
def preflight_start(request: HttpRequest, name: str) -> HttpResponse:
    from .tasks import preflight_cluster

    cluster = get_object_or_404(Cluster, name=name)
    if not cluster.nodes.exists():
        messages.error(request, f"{cluster.name} has no nodes to compare.")
        return redirect(cluster)
    claim = limits.preflight_claim(cluster)
    if claim is None:
        messages.info(request, "A preflight of this cluster is already running: its result "
                      "appears in the watch panel.")  # fmt: skip
        return redirect(cluster)
    try:
        preflight_cluster.delay(cluster.pk, claim)
    except Exception:
        limits.preflight_release(cluster_id=cluster.pk, claim=claim)
        raise
    messages.success(request, "Preflight started: the result appears in the watch panel.")
    return redirect(cluster)
