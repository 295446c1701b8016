"""REST endpoints that follow a snapshot: its progress (`/api/v1/snapshots/N/`) and its nodes
a page at a time (`/api/v1/snapshots/N/nodes/`), as the per-rank table is paged.

The progress listed every node: 402 KB of JSON at 4,000 nodes, on every poll of a script
waiting for the verdict. It now carries the first NODE_PAGE nodes (every node of a snapshot of
up to that many, as before) and `nodes_next`, the URL of the rest; `counts` says how many
there are in each status."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import Invalid

from .apis import NodeCollectionSerializer, SnapshotSerializer, _count
from .diagnosis_serializers import RankPageSerializer
from .models import NodeStatus, Snapshot
from .selectors import OffsetPage, node_counts

# The nodes in one answer (and the most `limit` may ask for).
NODE_PAGE = 500


def nodes_page(snapshot: Snapshot, offset: int, limit: int, status: str | None) -> OffsetPage:
    """Nodes in name order (of `status`, when one is asked), sliced in the database."""
    rows = snapshot.collections.order_by("node_name")
    if status:
        rows = rows.filter(status=status)
    return OffsetPage(list(rows[offset : offset + limit]), offset, limit, rows.count())


def _nodes_url(request, snapshot: Snapshot, offset: int | None, limit: int, status) -> str | None:
    if offset is None:
        return None
    path = reverse("api-snapshot-nodes", args=[snapshot.pk])
    query = f"offset={offset}&limit={limit}" + (f"&status={status}" if status else "")
    return request.build_absolute_uri(f"{path}?{query}")


class SnapshotProgressSerializer(SnapshotSerializer):
    nodes = serializers.SerializerMethodField(
        help_text=f"the first {NODE_PAGE} nodes in name order (every node of a smaller "
        "snapshot); the rest from `nodes_next`"
    )
    nodes_next = serializers.SerializerMethodField(
        help_text="the next page of nodes (GET .../nodes/); null when `nodes` is every node"
    )
    counts = serializers.SerializerMethodField()

    class Meta(SnapshotSerializer.Meta):
        # expected_nodes / upload_until: a push snapshot waits for that many nodes until then.
        fields = [*SnapshotSerializer.Meta.fields, "expected_nodes", "upload_until", "counts",
                  "nodes", "nodes_next"]  # fmt: skip

    def _page(self, snapshot) -> OffsetPage:
        if not hasattr(self, "_first_page"):
            self._first_page = nodes_page(snapshot, 0, NODE_PAGE, None)
        return self._first_page

    def get_counts(self, snapshot) -> dict[str, int]:
        return node_counts(snapshot)

    def get_nodes(self, snapshot) -> list[dict]:
        return NodeCollectionSerializer(self._page(snapshot).rows, many=True).data

    def get_nodes_next(self, snapshot) -> str | None:
        offset = self._page(snapshot).next_offset
        return _nodes_url(self.context["request"], snapshot, offset, NODE_PAGE, None)


class SnapshotDetailApi(APIView):
    @extend_schema(responses=SnapshotProgressSerializer)
    def get(self, request, snapshot_pk: int):
        # Its class and summary from the diagnosis without its per-rank table.
        snapshot = get_object_or_404(Snapshot.objects.for_pages(), pk=snapshot_pk)
        return Response(SnapshotProgressSerializer(snapshot, context={"request": request}).data)


class NodePageSerializer(RankPageSerializer):
    """One page of a snapshot's nodes, in name order (the rank pages' shape)."""

    count = serializers.IntegerField(help_text="nodes in the whole list (of `status`, if asked)")
    results = NodeCollectionSerializer(many=True)


class SnapshotNodesApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("offset", int, description="the first node's index (default 0)"),
            OpenApiParameter("limit", int, description=f"nodes, 1 to {NODE_PAGE} (the default)"),
            OpenApiParameter(
                "status", str, enum=list(NodeStatus.values), description="only nodes in it"
            ),
        ],
        responses={200: NodePageSerializer},
    )
    def get(self, request, snapshot_pk: int):
        """The snapshot's nodes a page at a time, in name order, sliced in the database:
        `?offset=K&limit=L`, `&status=failed` for the failed ones only; `next` and `previous`
        are the neighbouring pages' URLs."""
        snapshot = get_object_or_404(Snapshot.objects.only("pk"), pk=snapshot_pk)
        offset = _count(request, "offset", 0, None)
        limit = _count(request, "limit", NODE_PAGE, NODE_PAGE, least=1)
        status = request.query_params.get("status") or None
        if status is not None and status not in NodeStatus.values:
            raise Invalid(f"`status` is one of {', '.join(NodeStatus.values)}.", field="status")
        page = nodes_page(snapshot, offset, limit, status)
        data = {
            "count": page.total,
            "offset": offset,
            "limit": limit,
            "next": _nodes_url(request, snapshot, page.next_offset, limit, status),
            "previous": _nodes_url(request, snapshot, page.previous_offset, limit, status),
            "results": page.rows,
        }
        return Response(NodePageSerializer(data).data)
