"""REST endpoints for clusters, nodes and incidents. Each validates, calls a service, answers."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from console.roles import Role

from . import selectors, services
from .models import Cluster, Incident, Node, PostMortem, Severity, Status, TimelineEvent
from .validators import normalise_host_key


class NodeSerializer(serializers.ModelSerializer):
    class Meta:
        model = Node
        fields = ["id", "name", "address", "port", "username", "key_path", "host_key"]

    def validate_host_key(self, value: str) -> str:
        return normalise_host_key(value)

    def validate(self, attrs):
        cluster = self.context["cluster"]
        name = attrs.get("name", getattr(self.instance, "name", None))
        others = Node.objects.filter(cluster=cluster, name=name)
        if self.instance:
            others = others.exclude(pk=self.instance.pk)
        if others.exists():
            raise serializers.ValidationError({"name": f"{cluster.name} already has {name}."})
        return attrs


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
        data = NodeSerializer(data=request.data, context={"cluster": cluster})
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
        data = NodeSerializer(
            instance, data=request.data, partial=True, context={"cluster": instance.cluster}
        )
        data.is_valid(raise_exception=True)
        services.node_update(node=instance, **data.validated_data)
        return Response(NodeSerializer(instance).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name: str, node: str):
        get_object_or_404(Node, cluster__name=name, name=node).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


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
        ]
        read_only_fields = ["status", "opened_at", "status_changed_at"]


class IncidentDetailSerializer(IncidentSerializer):
    events = EventSerializer(many=True, read_only=True)

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "events"]


class IncidentOpenSerializer(IncidentSerializer):
    snapshot = serializers.BooleanField(
        default=False, write_only=True, help_text="also start a snapshot of the cluster"
    )

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "snapshot"]


class IncidentListApi(APIView):
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

    @extend_schema(request=IncidentOpenSerializer, responses={201: IncidentDetailSerializer})
    def post(self, request):
        """Open an incident; with `"snapshot": true` also start a snapshot (one call from a
        training job's watchdog)."""
        from collectors.apis import SnapshotSerializer
        from collectors.tasks import snapshot_start

        data = IncidentOpenSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        take_snapshot = fields.pop("snapshot")
        incident = services.incident_open(opened_by=request.user, **fields)
        body = IncidentDetailSerializer(incident).data
        if take_snapshot:
            snapshot, _ = snapshot_start(incident=incident, by=request.user)
            body["snapshot"] = SnapshotSerializer(snapshot).data
        return Response(body, status=status.HTTP_201_CREATED)


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
            "summary",
            "impact",
            "classification",
            "root_cause",
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
