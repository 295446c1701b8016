"""Node forms that need a worker's word: adding a node checks its key file where the worker
looks for it, and "Test connection" runs the collector's SSH handshake. Composed here, above
clusters (the form, the service) and collectors (the worker's check)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusters import selectors as cluster_selectors
from clusters import services as cluster_services
from clusters.forms import NodeForm
from clusters.models import Cluster, Node, NodeCheck
from collectors.tasks import node_check_on_worker
from core.feedback import answer
from core.roles import Role, role_required


@require_POST
@role_required(Role.ADMIN)
def node_add(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    form = NodeForm(request.POST, cluster=cluster)
    check = None
    if form.is_valid() and form.cleaned_data.get("key_path"):
        check = node_check_on_worker(Node(**form.cleaned_data).ssh_target().to_json(), "key")
        if check["ok"] is False:
            form.add_error("key_path", check["text"])
    if form.errors:
        page = cluster_selectors.cluster_page(cluster, node_form=form)
        return render(request, "clusters/detail.html", page.context(), status=400)
    node = cluster_services.node_create(cluster=cluster, **form.cleaned_data)
    messages.success(request, f"Node {node.name} added.")
    if check is not None and check["ok"] is None:
        messages.warning(request, f"The key file of {node.name} was {check['text']}")
    return redirect(cluster)


@require_POST
@role_required(Role.ADMIN)
def node_test(request: HttpRequest, name: str, node_pk: int) -> HttpResponse:
    node = get_object_or_404(Node.objects.select_related("cluster"), pk=node_pk, cluster__name=name)
    spec = node.ssh_target().to_json()
    result = node_check_on_worker(spec, "connection")
    state = {True: NodeCheck.OK, False: NodeCheck.FAILED, None: NodeCheck.UNKNOWN}[result["ok"]]
    if result["ok"] is not None:  # "nobody answered" says nothing about the node
        cluster_services.node_check_record(
            node_pk=node.pk, spec=spec, state=state, text=result["text"]
        )
    level = {True: "success", False: "error", None: "info"}[result["ok"]]
    where = f" (from {result['worker']})" if result.get("worker") else ""
    return answer(
        request,
        to=node.cluster.get_absolute_url(),
        text=f"{node.name}: {result['text']}{where}",
        level=level,
        changed=False,
    )
