"""REST endpoints for snapshots: start one, follow it, read its diagnosis."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import Conflict
from incidents.models import Incident

from . import selectors, tasks
from .bundles import read_bundle_fileobj
from .diagnosis_serializers import DiagnosisSerializer
from .models import NodeCollection, Snapshot


class NodeCollectionSerializer(serializers.ModelSerializer):
    duration_s = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = NodeCollection
        fields = ["node_name", "address", "status", "reason", "attempts", "duration_s"]


class SnapshotSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    classification = serializers.SerializerMethodField()
    summary = serializers.SerializerMethodField()

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "incident",
            "status",
            "requested_by",
            "source",
            "started_at",
            "finished_at",
            "duration_s",
            "error",
            "classification",
            "summary",
        ]

    def get_classification(self, snapshot) -> str | None:
        return (snapshot.diagnosis or {}).get("classification")

    def get_summary(self, snapshot) -> str | None:
        return (snapshot.diagnosis or {}).get("summary")


class SnapshotProgressSerializer(SnapshotSerializer):
    nodes = serializers.SerializerMethodField()
    counts = serializers.SerializerMethodField()

    class Meta(SnapshotSerializer.Meta):
        fields = [*SnapshotSerializer.Meta.fields, "counts", "nodes"]

    def get_counts(self, snapshot) -> dict[str, int]:
        return selectors.node_counts(snapshot)

    def get_nodes(self, snapshot) -> list[dict]:
        collections = snapshot.collections.order_by("node_name")
        return NodeCollectionSerializer(collections, many=True).data


class SnapshotStartApi(APIView):
    @extend_schema(request=None, responses={201: SnapshotSerializer, 200: SnapshotSerializer})
    def post(self, request, pk: int):
        """Start a snapshot; if one is already running for the incident, return it (200)."""
        incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
        snapshot, created = tasks.snapshot_start(incident=incident, by=request.user)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(SnapshotSerializer(snapshot).data, status=code)


class SnapshotDetailApi(APIView):
    @extend_schema(responses=SnapshotProgressSerializer)
    def get(self, request, snapshot_pk: int):
        snapshot = get_object_or_404(Snapshot, pk=snapshot_pk)
        return Response(SnapshotProgressSerializer(snapshot).data)


class SnapshotDiagnosisApi(APIView):
    @extend_schema(responses={200: DiagnosisSerializer})
    def get(self, request, snapshot_pk: int):
        snapshot = get_object_or_404(Snapshot, pk=snapshot_pk)
        if snapshot.diagnosis is None:
            raise Conflict(f"Snapshot {snapshot.pk} is {snapshot.status}; no diagnosis yet.")
        return Response(DiagnosisSerializer(snapshot.diagnosis).data)


class BundleImportApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {"bundle": {"type": "string", "format": "binary"}},
            }
        },
        responses={201: SnapshotSerializer},
    )
    def post(self, request, pk: int):
        """Import an evidence bundle (.tar.gz, field `bundle`) as a snapshot of the incident."""
        incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
        upload = request.FILES.get("bundle")
        if upload is None:
            raise serializers.ValidationError({"bundle": "attach the bundle file as `bundle`"})
        evidence = read_bundle_fileobj(upload)  # BundleRefused answers 400 {"bundle": why}
        snapshot = tasks.snapshot_import_bundle(
            incident=incident, evidence=evidence, by=request.user
        )
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class BundleExportApi(APIView):
    @extend_schema(responses={(200, "application/gzip"): bytes})
    def get(self, request, snapshot_pk: int):
        snapshot = get_object_or_404(Snapshot.objects.select_related("incident"), pk=snapshot_pk)
        response = HttpResponse(
            selectors.snapshot_bundle(snapshot), content_type="application/gzip"
        )
        response["Content-Disposition"] = f'attachment; filename="snapshot-{snapshot.pk}.tar.gz"'
        return response
