"""API verbs that touch incidents and snapshots at once."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from collectors import starts
from collectors.apis import started_snapshot_data
from incidents import apis as incident_apis
from incidents import services as incident_services

from .opening import job_plan_for_opening


class IncidentOpenSerializer(incident_apis.IncidentSerializer):
    snapshot = serializers.BooleanField(
        default=False, write_only=True, help_text="also start a snapshot of the cluster"
    )
    slurm_job = serializers.CharField(
        required=False,
        write_only=True,
        max_length=64,
        help_text="the Slurm job id (4417203, 4417203_7, 4417203+1) on a Slurm cluster: its "
        "nodes are asked of the controller, registered and snapshot",
    )
    ray_job = serializers.CharField(
        required=False,
        write_only=True,
        max_length=64,
        help_text="the Ray job on a Ray cluster: its submission id (raysubmit_...), Ray job id "
        "or Ray Train run name; its Ray Train workers are asked of the head, their nodes "
        "registered and exactly their processes snapshot",
    )

    class Meta(incident_apis.IncidentSerializer.Meta):
        fields = [
            *incident_apis.IncidentSerializer.Meta.fields,
            "snapshot",
            "slurm_job",
            "ray_job",
        ]


class IncidentListApi(incident_apis.IncidentListApi):
    @extend_schema(
        request=IncidentOpenSerializer, responses={201: incident_apis.IncidentDetailSerializer}
    )
    def post(self, request):
        """Open an incident; with `"snapshot": true` also start a snapshot (one call from a
        training job's watchdog). On a push cluster the snapshot waits for the nodes' bundles:
        `snapshot.upload_token` and `snapshot.upload_command` say how they send them."""
        data = IncidentOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        take_snapshot = fields.pop("snapshot")
        jobs = {"slurm_job": fields.pop("slurm_job", ""), "ray_job": fields.pop("ray_job", "")}
        plan = job_plan_for_opening(fields["cluster"], **jobs)
        with transaction.atomic():  # a refused job opens nothing
            incident = incident_services.incident_open(opened_by=request.user, **fields)
            body = incident_apis.IncidentDetailSerializer(incident).data
            if plan is not None or take_snapshot:
                snapshot, _ = starts.snapshot_start(
                    incident=incident, by=request.user, job_plan=plan
                )
                # A push cluster's snapshot carries an upload token for its nodes (once).
                body["snapshot"] = started_snapshot_data(snapshot, request.user)
                body["scheduler_job"] = incident.scheduler_job
                body["scheduler_job_info"] = incident.scheduler_job_info
        return Response(body, status=status.HTTP_201_CREATED)
