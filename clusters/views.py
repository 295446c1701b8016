"""Cluster and node pages: everyone reads, admins change."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.roles import Role, has_role, role_required

from . import selectors, services
from .forms import ClusterForm, NodeForm
from .models import Cluster, Node


def cluster_list(request: HttpRequest) -> HttpResponse:
    return render(request, "clusters/list.html", selectors.cluster_list_page().context())


@role_required(Role.ADMIN)
def cluster_create(request: HttpRequest) -> HttpResponse:
    form = ClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_create(**form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Cluster {cluster.name} created. Now add its nodes.")
            return redirect(cluster)
    return render(request, "clusters/form.html", {"form": form})


def cluster_detail(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster(name)
    node_form = NodeForm(cluster=cluster) if has_role(request.user, Role.ADMIN) else None
    page = selectors.cluster_page(cluster, node_form=node_form)
    return render(request, "clusters/detail.html", page.context())


def node_states(request: HttpRequest, name: str) -> HttpResponse:
    """Each node's connection state, for the node list's poll while a check runs (htmx)."""
    page = selectors.cluster_page(_cluster(name))
    return render(request, "clusters/_node_states.html", page.context())


def _cluster(name: str) -> Cluster:
    try:
        return Cluster.objects.get(name=name)
    except Cluster.DoesNotExist as exc:
        raise Http404(f"No cluster named {name}") from exc


@role_required(Role.ADMIN)
def cluster_edit(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    form = ClusterForm(request.POST or None, instance=cluster)
    if request.method == "POST" and form.is_valid():
        services.cluster_update(cluster=cluster, **form.cleaned_data)
        messages.success(request, f"Cluster {cluster.name} saved.")
        return redirect(cluster)
    return render(request, "clusters/form.html", {"form": form, "cluster": cluster})


@require_POST
@role_required(Role.ADMIN)
def node_add(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    form = NodeForm(request.POST, cluster=cluster)
    if form.is_valid():
        node = services.node_create(cluster=cluster, **form.cleaned_data)
        messages.success(request, f"Node {node.name} added.")
        return redirect(cluster)
    page = selectors.cluster_page(cluster, node_form=form)
    return render(request, "clusters/detail.html", page.context(), status=400)


@require_POST
@role_required(Role.ADMIN)
def node_delete(request: HttpRequest, name: str, node_pk: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_pk, cluster__name=name)
    node.delete()
    messages.success(request, f"Node {node.name} removed.")
    return redirect("clusters:detail", name=name)
