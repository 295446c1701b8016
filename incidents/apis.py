"""REST endpoints for incidents. Each validates, calls a service, answers."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster

from . import selectors, services
from .models import Incident, PostMortem, Severity, Status, TimelineEvent


class EventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(read_only=True)

    class Meta:
        model = TimelineEvent
        fields = ["id", "at", "kind", "actor", "summary", "details", "pinned"]


class IncidentSerializer(serializers.ModelSerializer):
    reference = serializers.CharField(read_only=True)
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    commander = serializers.SlugRelatedField(
        slug_field="username",
        queryset=get_user_model().objects.filter(is_active=True),
        required=False,
        allow_null=True,
    )
    opened_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Incident
        fields = [
            "id",
            "reference",
            "title",
            "cluster",
            "severity",
            "status",
            "commander",
            "description",
            "opened_by",
            "opened_at",
            "status_changed_at",
            "scheduler_job",
            "scheduler_job_info",
        ]
        read_only_fields = ["scheduler_job", "scheduler_job_info"]
        read_only_fields = ["status", "opened_at", "status_changed_at"]


class IncidentDetailSerializer(IncidentSerializer):
    events = EventSerializer(many=True, read_only=True)

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "events"]


class IncidentListApi(APIView):
    """Lists incidents. Opening one (POST) may also start a snapshot, so that verb is
    composed above both apps, in pages.apis.IncidentListApi."""

    @extend_schema(responses=IncidentSerializer(many=True))
    def get(self, request):
        query = request.query_params
        for name, allowed in (("status", Status.values), ("severity", Severity.values)):
            if query.get(name) and query[name] not in allowed:
                raise serializers.ValidationError({name: f"one of {', '.join(allowed)}"})
        incidents = selectors.incident_list(
            status=query.get("status", ""),
            severity=query.get("severity", ""),
            cluster=query.get("cluster", ""),
        )
        return Response(IncidentSerializer(incidents[:500], many=True).data)


class IncidentDetailApi(APIView):
    @extend_schema(responses=IncidentDetailSerializer)
    def get(self, request, pk: int):
        incident = get_object_or_404(Incident, pk=pk)
        body = IncidentDetailSerializer(incident).data
        body["events"] = EventSerializer(selectors.incident_timeline(incident), many=True).data
        return Response(body)

    @extend_schema(request=IncidentSerializer, responses=IncidentSerializer)
    def patch(self, request, pk: int):
        incident = get_object_or_404(Incident, pk=pk)
        data = IncidentSerializer(incident, data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = {k: v for k, v in data.validated_data.items() if k != "cluster"}
        services.incident_update(incident=incident, by=request.user, **fields)
        return Response(IncidentSerializer(incident).data)


class StatusChangeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Status.choices)
    note = serializers.CharField(required=False, allow_blank=True, max_length=400, default="")


class IncidentStatusApi(APIView):
    @extend_schema(request=StatusChangeSerializer, responses=IncidentSerializer)
    def post(self, request, pk: int):
        incident = get_object_or_404(Incident, pk=pk)
        data = StatusChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.incident_change_status(
            incident=incident,
            to_status=data.validated_data["status"],
            by=request.user,
            note=data.validated_data["note"],
        )
        return Response(IncidentSerializer(incident).data)


class NoteSerializer(serializers.Serializer):
    text = serializers.CharField(max_length=2000)
    pinned = serializers.BooleanField(default=False)


class IncidentNoteApi(APIView):
    @extend_schema(request=NoteSerializer, responses={201: EventSerializer})
    def post(self, request, pk: int):
        incident = get_object_or_404(Incident, pk=pk)
        data = NoteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        event = services.incident_add_note(
            incident=incident, by=request.user, **data.validated_data
        )
        return Response(EventSerializer(event).data, status=status.HTTP_201_CREATED)


class PostMortemSerializer(serializers.ModelSerializer):
    incident = serializers.CharField(source="incident.reference", read_only=True)
    written_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    action_items = serializers.ListField(source="action_item_list", child=serializers.CharField())
    pinned_events = serializers.SerializerMethodField()

    class Meta:
        model = PostMortem
        fields = [
            "incident",
            "status",
            "version",
            "summary",
            "impact",
            "classification",
            "root_cause",
            "contributing_factors",
            "detection",
            "resolution",
            "action_items",
            "written_by",
            "updated_at",
            "pinned_events",
        ]

    def get_pinned_events(self, postmortem) -> list[dict]:
        events = postmortem.incident.events.filter(pinned=True).select_related("author")
        return EventSerializer(events.order_by("at", "pk"), many=True).data


class PostMortemApi(APIView):
    @extend_schema(responses=PostMortemSerializer)
    def get(self, request, pk: int):
        postmortem = get_object_or_404(
            PostMortem.objects.select_related("incident"), incident_id=pk
        )
        return Response(PostMortemSerializer(postmortem).data)
