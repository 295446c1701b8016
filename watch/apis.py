"""The job's heartbeat: `POST /api/v1/clusters/<name>/heartbeat/` with `{"step": N}` (and
optionally `"rank"`, `"checkpoint": true` while a checkpoint is written, `"node"`).

Authenticated by the cluster's own heartbeat token (`Authorization: Bearer hdw_...`, made on
the cluster page: it can do nothing else), or by a responder's API token or session. Cheap:
one token lookup and one upsert.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from core.api_auth import TokenAuthentication
from core.errors import Invalid, NotFound
from core.roles import Role, has_role

from . import configure, heartbeats, limits, selectors
from .models import Watch


class HeartbeatTokenAuthentication(authentication.BaseAuthentication):
    """`Bearer hdw_...`: the token of one cluster's watch; no user behind it."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if len(header) != 2 or header[0].lower() != "bearer":
            return None
        if not header[1].startswith(heartbeats.TOKEN_PREFIX):
            return None
        watch = selectors.watch_by_token(header[1])
        if watch is None:
            raise exceptions.AuthenticationFailed("Unknown or replaced heartbeat token.")
        return None, watch

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="hangdesk"'


class HeartbeatTokenScheme(OpenApiAuthenticationExtension):
    target_class = "watch.apis.HeartbeatTokenAuthentication"
    name = "heartbeatToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A cluster's heartbeat token (hdw_...), made on the cluster page.",
        }


class HeartbeatPermission(permissions.BasePermission):
    """The cluster's own heartbeat token, or a responder."""

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, Watch):
            return request.auth.cluster.name == view.kwargs.get("name")
        user = request.user
        return user is not None and user.is_authenticated and has_role(user, Role.RESPONDER)


class HeartbeatSerializer(serializers.Serializer):
    step = serializers.IntegerField(min_value=0, max_value=2**62)
    rank = serializers.IntegerField(min_value=0, max_value=131_071, required=False)
    checkpoint = serializers.BooleanField(required=False, default=False)
    node = serializers.CharField(max_length=128, required=False, default="")


class HeartbeatAnswerSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    rank = serializers.IntegerField(allow_null=True)
    step = serializers.IntegerField()
    watched = serializers.BooleanField()


class HeartbeatApi(APIView):
    authentication_classes = [
        HeartbeatTokenAuthentication,
        TokenAuthentication,
        authentication.SessionAuthentication,
    ]
    permission_classes = [HeartbeatPermission]

    @extend_schema(request=HeartbeatSerializer, responses={202: HeartbeatAnswerSerializer})
    def post(self, request, name: str):
        data = HeartbeatSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if isinstance(request.auth, Watch):
            watch = request.auth
        else:
            cluster = Cluster.objects.filter(name=name).first()
            if cluster is None:
                raise NotFound(f"No cluster named {name}.")
            watch = configure.watch_for(cluster)
        rank = data.validated_data.get("rank")
        world = watch.cluster.expected_world_size or 0
        if rank is not None and world and rank >= world:
            raise Invalid(f"rank {rank} is outside the cluster's world of {world}", field="rank")
        if not limits.heartbeat_admit(watch):
            raise exceptions.Throttled(
                wait=1,
                detail="Too many heartbeats: at most one per "
                "rank and step, and this many a second per cluster.",
            )
        heartbeat = heartbeats.heartbeat_record(
            watch=watch,
            step=data.validated_data["step"],
            rank=rank,
            checkpoint=data.validated_data["checkpoint"],
            node=data.validated_data["node"],
        )
        answer = {"cluster": name, "rank": rank, "step": heartbeat.step, "watched": watch.enabled}
        return Response(answer, status=202)
