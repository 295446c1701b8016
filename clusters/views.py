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
from .models import Cluster, Node, NodeCheck


def cluster_list(request: HttpRequest) -> HttpResponse:
    return render(request, "clusters/list.html", {"clusters": selectors.cluster_list()})


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
    try:
        cluster, nodes = selectors.cluster_with_nodes(name)
    except Cluster.DoesNotExist as exc:
        raise Http404(f"No cluster named {name}") from exc
    node_form = None
    if has_role(request.user, Role.ADMIN):
        node_form = NodeForm(cluster=cluster)
    return render(
        request,
        "clusters/detail.html",
        {"cluster": cluster, "node_form": node_form, **_node_list(nodes)},
    )


def node_list(request: HttpRequest, name: str) -> HttpResponse:
    """The node list alone, with each node's connection check (htmx, while one runs)."""
    try:
        cluster, nodes = selectors.cluster_with_nodes(name)
    except Cluster.DoesNotExist as exc:
        raise Http404(f"No cluster named {name}") from exc
    return render(request, "clusters/_nodes.html", {"cluster": cluster, **_node_list(nodes)})


def _node_list(nodes) -> dict:
    nodes = list(nodes)
    return {"nodes": nodes, "checking": any(n.check_state == NodeCheck.CHECKING for n in nodes)}


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
    nodes = cluster.nodes.order_by("name")
    return render(
        request,
        "clusters/detail.html",
        {"cluster": cluster, "nodes": nodes, "node_form": form},
        status=400,
    )


@require_POST
@role_required(Role.ADMIN)
def node_delete(request: HttpRequest, name: str, node_pk: int) -> HttpResponse:
    node = get_object_or_404(Node, pk=node_pk, cluster__name=name)
    node.delete()
    messages.success(request, f"Node {node.name} removed.")
    return redirect("clusters:detail", name=name)
