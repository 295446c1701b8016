"""REST endpoints for clusters and nodes. Each validates, calls a service, answers."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.roles import Role

from . import services
from .models import METRICS_FIELDS, SOURCE_FIELDS, Cluster, Node


class NodeSerializer(serializers.ModelSerializer):
    """Field checks come from the model's validators; the services run Node.clean()."""

    class Meta:
        model = Node
        fields = ["id", "name", "address", "port", "username", "key_path", "host_key"]
        fields += ["check_state", "check_text", "checked_at"]
        # The last connection check, written by a worker: shown, never set by a client.
        read_only_fields = ["check_state", "check_text", "checked_at"]


class ClusterSerializer(serializers.ModelSerializer):
    nodes = NodeSerializer(many=True, read_only=True)
    log_globs = serializers.ListField(child=serializers.CharField(), required=False)
    flight_recorder_globs = serializers.ListField(child=serializers.CharField(), required=False)

    class Meta:
        model = Cluster
        fields = [
            "id",
            "name",
            "description",
            "process_pattern",
            "expected_world_size",
            "log_globs",
            "flight_recorder_globs",
            "pyspy_command",
            *SOURCE_FIELDS,
            *METRICS_FIELDS,
            "nodes",
        ]


class ClusterListApi(APIView):
    write_role = Role.ADMIN

    @extend_schema(responses=ClusterSerializer(many=True))
    def get(self, request):
        clusters = Cluster.objects.prefetch_related("nodes").order_by("name")
        return Response(ClusterSerializer(clusters, many=True).data)

    @extend_schema(request=ClusterSerializer, responses={201: ClusterSerializer})
    def post(self, request):
        data = ClusterSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = services.cluster_create(**data.validated_data)
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)


class ClusterDetailApi(APIView):
    write_role = Role.ADMIN

    @extend_schema(responses=ClusterSerializer)
    def get(self, request, name: str):
        cluster = get_object_or_404(Cluster.objects.prefetch_related("nodes"), name=name)
        return Response(ClusterSerializer(cluster).data)

    @extend_schema(request=ClusterSerializer, responses=ClusterSerializer)
    def patch(self, request, name: str):
        cluster = get_object_or_404(Cluster, name=name)
        data = ClusterSerializer(cluster, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        services.cluster_update(cluster=cluster, **data.validated_data)
        return Response(ClusterSerializer(cluster).data)


class NodeListApi(APIView):
    write_role = Role.ADMIN

    @extend_schema(request=NodeSerializer, responses={201: NodeSerializer})
    def post(self, request, name: str):
        cluster = get_object_or_404(Cluster, name=name)
        data = NodeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        node = services.node_create(cluster=cluster, **data.validated_data)
        return Response(NodeSerializer(node).data, status=status.HTTP_201_CREATED)


class NodeDetailApi(APIView):
    write_role = Role.ADMIN

    @extend_schema(request=NodeSerializer, responses=NodeSerializer)
    def patch(self, request, name: str, node: str):
        instance = get_object_or_404(
            Node.objects.select_related("cluster"), cluster__name=name, name=node
        )
        data = NodeSerializer(instance, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        services.node_update(node=instance, **data.validated_data)
        return Response(NodeSerializer(instance).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name: str, node: str):
        get_object_or_404(Node, cluster__name=name, name=node).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
