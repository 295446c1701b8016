"""API verbs that touch incidents and snapshots at once."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from collectors import tasks as snapshot_tasks
from collectors.apis import SnapshotSerializer
from incidents import apis as incident_apis
from incidents import services as incident_services


class IncidentOpenSerializer(incident_apis.IncidentSerializer):
    snapshot = serializers.BooleanField(
        default=False, write_only=True, help_text="also start a snapshot of the cluster"
    )

    class Meta(incident_apis.IncidentSerializer.Meta):
        fields = [*incident_apis.IncidentSerializer.Meta.fields, "snapshot"]


class IncidentListApi(incident_apis.IncidentListApi):
    @extend_schema(
        request=IncidentOpenSerializer, responses={201: incident_apis.IncidentDetailSerializer}
    )
    def post(self, request):
        """Open an incident; with `"snapshot": true` also start a snapshot (one call from a
        training job's watchdog)."""
        data = IncidentOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        take_snapshot = fields.pop("snapshot")
        incident = incident_services.incident_open(opened_by=request.user, **fields)
        body = incident_apis.IncidentDetailSerializer(incident).data
        if take_snapshot:
            snapshot, _ = snapshot_tasks.snapshot_start(incident=incident, by=request.user)
            body["snapshot"] = SnapshotSerializer(snapshot).data
        return Response(body, status=status.HTTP_201_CREATED)
