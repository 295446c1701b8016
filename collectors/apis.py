"""REST endpoints for snapshots: start one, follow it, read its diagnosis."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from analysis import guide
from core.errors import Conflict, Forbidden, TooLarge
from core.roles import Role, has_role
from incidents.models import Incident
from incidents.services import incident_require_open

from . import audit, selectors, tasks
from .bundles import read_bundle_fileobj
from .diagnosis_serializers import DiagnosisSerializer
from .models import NodeCollection, Snapshot
from .views import MAX_BUNDLE_UPLOAD_BYTES


class NodeCollectionSerializer(serializers.ModelSerializer):
    duration_s = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = NodeCollection
        fields = ["node_name", "address", "status", "reason", "attempts", "duration_s"]


class SnapshotSerializer(serializers.ModelSerializer):
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    classification = serializers.SerializerMethodField()
    classification_name = serializers.SerializerMethodField(
        help_text="the class in plain words, e.g. 'A · a rank left or stalled outside the "
        "collective'"
    )
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
            "classification_name",
            "summary",
        ]

    def get_classification(self, snapshot) -> str | None:
        diagnosis = snapshot.read_diagnosis()
        return diagnosis.classification if diagnosis else None

    def get_classification_name(self, snapshot) -> str | None:
        code = self.get_classification(snapshot)
        return guide.class_name(code) if code else None

    def get_summary(self, snapshot) -> str | None:
        diagnosis = snapshot.read_diagnosis()
        return diagnosis.summary if diagnosis else None


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
        return Response(DiagnosisSerializer(snapshot.read_diagnosis().to_json()).data)


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
        """Import an evidence bundle (.tar.gz, field `bundle`, at most 512 MiB) as a snapshot
        of the incident; over the cap: 413."""
        incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
        incident_require_open(incident)
        _refuse_over_cap(request)  # before the body is read: Content-Length says it all
        upload = request.FILES.get("bundle")
        if upload is None:
            raise serializers.ValidationError({"bundle": "attach the bundle file as `bundle`"})
        if upload.size > MAX_BUNDLE_UPLOAD_BYTES:
            raise TooLarge(_over_cap_message(upload.size), field="bundle")
        evidence = read_bundle_fileobj(upload)  # BundleRefused answers 400 {"bundle": why}
        snapshot = tasks.snapshot_import_bundle(
            incident=incident, evidence=evidence, by=request.user
        )
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


# Room for the multipart envelope around the file itself.
_MULTIPART_SLACK = 1 << 20


def _over_cap_message(size: int) -> str:
    return f"{size >> 20} MiB is over the {MAX_BUNDLE_UPLOAD_BYTES >> 20} MiB bundle limit."


def _refuse_over_cap(request) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_BUNDLE_UPLOAD_BYTES + _MULTIPART_SLACK:
        raise TooLarge(_over_cap_message(length), field="bundle")


class BundleExportApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "raw", bool, description="1: the evidence as collected (audited); else masked"
            )
        ],
        responses={(200, "application/gzip"): bytes},
    )
    def get(self, request, snapshot_pk: int):
        """The snapshot's evidence as a bundle, secrets masked unless `raw=1`. Responders
        only; every export is written to the audit log."""
        if not has_role(request.user, Role.RESPONDER):
            raise Forbidden("Exporting evidence needs the responder role.")
        snapshot = get_object_or_404(Snapshot.objects.select_related("incident"), pk=snapshot_pk)
        raw = request.query_params.get("raw") in ("1", "true")
        content = selectors.snapshot_bundle(snapshot, raw=raw)
        audit.evidence_exported(request, snapshot, raw=raw, via="api")
        response = HttpResponse(content, content_type="application/gzip")
        kind = "-raw" if raw else ""
        response["Content-Disposition"] = (
            f'attachment; filename="snapshot-{snapshot.pk}{kind}.tar.gz"'
        )
        return response
