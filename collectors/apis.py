"""REST endpoints for snapshots: start one, follow it, read its diagnosis."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import authentication, exceptions, permissions, serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import ClusterSource
from core.api_auth import TokenAuthentication
from core.bodycap import BodyCap
from core.downloads import disposition
from core.errors import Conflict, Forbidden, Invalid, TooLarge
from core.models import ApiToken
from core.roles import Role, has_role
from incidents.models import Incident
from incidents.services import incident_require_open
from readings import guide

from . import audit, push, selectors, starts
from .bundles import read_bundle_fileobj
from .diagnosis_serializers import DiagnosisPageSerializer, RankPageSerializer
from .models import NodeCollection, Snapshot
from .views import MAX_BUNDLE_UPLOAD_BYTES, MULTIPART_SLACK


class NodeCollectionSerializer(serializers.ModelSerializer):
    duration_s = serializers.FloatField(read_only=True, allow_null=True)
    reason = serializers.CharField(
        read_only=True,
        help_text="failed: why the node gave nothing; ok: why its evidence stopped short "
        "(what came is read), or empty when it is whole",
    )

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
    provisional = serializers.SerializerMethodField(
        help_text="while collecting: a first verdict from the nodes in (95 %, or the slowest "
        "past the visit deadline), with the nodes still out; null once the verdict is in"
    )

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
            "provisional",
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

    def get_provisional(self, snapshot) -> dict | None:
        return selectors.read_provisional(snapshot)


class PushSnapshotSerializer(SnapshotSerializer):
    expected_nodes = serializers.IntegerField(read_only=True, allow_null=True)
    upload_until = serializers.DateTimeField(read_only=True, allow_null=True)
    upload_token = serializers.SerializerMethodField(
        help_text="push clusters: a new upload token for this snapshot, shown this once"
    )
    upload_command = serializers.SerializerMethodField(
        help_text="push clusters: the line each node runs (hangdesk collect | hangdesk upload)"
    )

    class Meta(SnapshotSerializer.Meta):
        fields = [*SnapshotSerializer.Meta.fields, "expected_nodes", "upload_until",
                  "upload_token", "upload_command"]  # fmt: skip

    def get_upload_token(self, snapshot) -> str | None:
        return self.context.get("upload_token")

    def get_upload_command(self, snapshot) -> str | None:
        token = self.context.get("upload_token")
        if not token:
            return None
        return push.upload_command(
            snapshot=snapshot, token=token, base_url=settings.HANGDESK_BASE_URL
        )


def started_snapshot_data(snapshot: Snapshot, user) -> dict:
    """A snapshot as its start answers it; a push snapshot that waits carries a new upload
    token for the caller (shown once: only its hash is kept)."""
    if not snapshot.waits_for_uploads:
        return SnapshotSerializer(snapshot).data
    token = push.upload_token_issue(snapshot=snapshot, by=user)
    return PushSnapshotSerializer(snapshot, context={"upload_token": token}).data


class SnapshotStartApi(APIView):
    @extend_schema(
        request=None, responses={201: PushSnapshotSerializer, 200: PushSnapshotSerializer}
    )
    def post(self, request, pk: int):
        """Start a snapshot; if one is already running for the incident, return it (200). A
        push cluster's snapshot waits for its nodes' bundles: the answer carries an upload
        token for them and the command they run."""
        incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
        snapshot, created = starts.snapshot_start(incident=incident, by=request.user)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(started_snapshot_data(snapshot, request.user), status=code)


# The per-rank table's rows in one answer of the API (and the most `limit` may ask for).
RANK_PAGE = 1000


def _diagnosed(snapshot_pk: int) -> Snapshot:
    """The snapshot read without its per-rank table; 409 before its diagnosis."""
    snapshot = get_object_or_404(Snapshot.objects.for_pages(), pk=snapshot_pk)
    if not snapshot.has_diagnosis:
        raise Conflict(f"Snapshot {snapshot.pk} is {snapshot.status}; no diagnosis yet.")
    return snapshot


def _ranks_url(request, snapshot: Snapshot, offset: int | None, limit: int) -> str | None:
    if offset is None:
        return None
    path = reverse("api-ranks", args=[snapshot.pk])
    return request.build_absolute_uri(f"{path}?offset={offset}&limit={limit}")


class SnapshotDiagnosisApi(APIView):
    @extend_schema(responses={200: DiagnosisPageSerializer})
    def get(self, request, snapshot_pk: int):
        """The stored diagnosis (masked as stored), whole but for its per-rank table: the
        first RANK_PAGE rows in rank order, `per_rank_total` of them in all, the rest from
        `per_rank_next` (GET .../ranks/)."""
        snapshot = _diagnosed(snapshot_pk)
        page = selectors.rank_rows_page(snapshot, 0, RANK_PAGE)
        data = {
            **snapshot.read_diagnosis().to_json(),
            "per_rank": page.rows,
            "per_rank_total": page.total,
            "per_rank_next": _ranks_url(request, snapshot, page.next_offset, RANK_PAGE),
        }
        return Response(DiagnosisPageSerializer(data).data)


class SnapshotRanksApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("offset", int, description="the first row's index (default 0)"),
            OpenApiParameter("limit", int, description=f"rows, 1 to {RANK_PAGE} (the default)"),
        ],
        responses={200: RankPageSerializer},
    )
    def get(self, request, snapshot_pk: int):
        """The per-rank table a page at a time, in rank order, sliced in the database:
        `?offset=K&limit=L`; `next` and `previous` are the neighbouring pages' URLs."""
        snapshot = _diagnosed(snapshot_pk)
        offset = _count(request, "offset", 0, None)
        limit = _count(request, "limit", RANK_PAGE, RANK_PAGE, least=1)
        page = selectors.rank_rows_page(snapshot, offset, limit)
        previous = page.previous_offset
        return Response(
            RankPageSerializer(
                {
                    "count": page.total,
                    "offset": offset,
                    "limit": limit,
                    "next": _ranks_url(request, snapshot, page.next_offset, limit),
                    "previous": _ranks_url(request, snapshot, previous, limit),
                    "results": page.rows,
                }
            ).data
        )


def _count(request, name: str, default: int, most: int | None, *, least: int = 0) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least or (most is not None and value > most):
        upper = f" to {most}" if most is not None else " or more"
        raise Invalid(f"`{name}` is a whole number, {least}{upper}.", field=name)
    return value


class BundleImportApi(APIView):
    # core.bodycap refuses more from Content-Length before anything (DRF's CSRF check of a
    # session included) reads the body.
    body_cap = BodyCap(MAX_BUNDLE_UPLOAD_BYTES, "bundle", "bundle", slack=MULTIPART_SLACK)
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
        snapshot = starts.snapshot_import_bundle(
            incident=incident, evidence=evidence, by=request.user
        )
        return Response(SnapshotSerializer(snapshot).data, status=status.HTTP_201_CREATED)


def _over_cap_message(size: int) -> str:
    return f"{size >> 20} MiB is over the {MAX_BUNDLE_UPLOAD_BYTES >> 20} MiB bundle limit."


def _refuse_over_cap(request) -> None:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_BUNDLE_UPLOAD_BYTES + MULTIPART_SLACK:
        raise TooLarge(_over_cap_message(length), field="bundle")


class BundleExportApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "raw", bool, description="1: the evidence as collected (audited); else masked. "
                "Over a GET only with an API token: a browser session asks by POST."
            )
        ],
        responses={(200, "application/gzip"): bytes},
    )  # fmt: skip
    def get(self, request, snapshot_pk: int):
        """The snapshot's evidence as a bundle, secrets masked unless `raw=1`. Responders
        only; every export is written to the audit log."""
        raw = request.query_params.get("raw") in ("1", "true")
        if raw and not isinstance(request.auth, ApiToken):
            # A session is ambient: another site could make the browser send this GET.
            raise Forbidden("A raw export over a browser session is a POST (with its CSRF token).")
        return self._export(request, snapshot_pk, raw=raw)

    @extend_schema(request=None, responses={(200, "application/gzip"): bytes})
    def post(self, request, snapshot_pk: int):
        """The same export, `raw=1` in the form or the query: what a browser session uses
        (a POST is CSRF-checked)."""
        raw = "1" in (request.data.get("raw"), request.query_params.get("raw"))
        return self._export(request, snapshot_pk, raw=raw)

    def _export(self, request, snapshot_pk: int, *, raw: bool) -> HttpResponse:
        if not has_role(request.user, Role.RESPONDER):
            raise Forbidden("Exporting evidence needs the responder role.")
        snapshot = get_object_or_404(Snapshot.objects.select_related("incident"), pk=snapshot_pk)
        content = selectors.snapshot_bundle(snapshot, raw=raw)
        audit.evidence_exported(request, snapshot, raw=raw, via="api")
        response = HttpResponse(content, content_type="application/gzip")
        kind = "-raw" if raw else ""
        response["Content-Disposition"] = disposition(f"snapshot-{snapshot.pk}{kind}.tar.gz")
        return response


# --- push: a node's bundle into the snapshot waiting for it ---------------------------------


@dataclass(frozen=True)
class UploadGrant:
    """What an upload token proves: the bearer may add bundles to this one snapshot."""

    snapshot: Snapshot


class UploadTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer hds_...`: a push snapshot's upload token. It authenticates no
    person: `request.auth` is the grant for the snapshot; other tokens are left to
    core.api_auth.TokenAuthentication."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if len(header) != 2 or header[0].lower() not in ("bearer", "token"):
            return None
        if not header[1].startswith(push.TOKEN_PREFIX):
            return None
        snapshot = push.snapshot_of_upload_token(header[1])
        if snapshot is None:
            raise exceptions.AuthenticationFailed(
                "Unknown upload token, or its snapshot no longer waits for bundles."
            )
        return None, UploadGrant(snapshot)

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="hangdesk"'


class UploadTokenScheme(OpenApiAuthenticationExtension):
    """Describes UploadTokenAuthentication in the OpenAPI schema."""

    target_class = "collectors.apis.UploadTokenAuthentication"
    name = "uploadToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A push snapshot's upload token (hds_...), shown once on the "
            "incident to the responder who asked for the snapshot; it admits bundles to that "
            "snapshot only, until its wait ends.",
        }


class UploadPermission(permissions.BasePermission):
    """An upload token's grant, or a responder (their API token)."""

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, UploadGrant):
            return True
        user = request.user
        return user is not None and user.is_authenticated and has_role(user, Role.RESPONDER)


class BundleBodyParser(BaseParser):
    """Names the bundle body's media types for the schema; the view reads the stream itself."""

    media_type = "application/gzip"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream


class PushReceiptSerializer(serializers.Serializer):
    snapshot = serializers.IntegerField(source="snapshot.pk")
    status = serializers.CharField(source="snapshot.status")
    nodes = serializers.ListField(child=serializers.CharField(), help_text="nodes just stored")
    received = serializers.IntegerField(help_text="nodes of the snapshot in so far")
    expected = serializers.IntegerField(allow_null=True, help_text="nodes it waits for")
    analysis_due = serializers.BooleanField(help_text="the last expected node is in")
    message = serializers.SerializerMethodField()

    def get_message(self, received) -> str:
        names = ", ".join(received.nodes[:3]) + (" …" if len(received.nodes) > 3 else "")
        then = "; analysing" if received.analysis_due else ""
        return (
            f"{names} stored in snapshot {received.snapshot.pk}: "
            f"{received.progress_text} nodes sent{then}"
        )


class PushUploadApi(APIView):
    """A node's bundle (`hangdesk collect | hangdesk upload`), for a push cluster's incident."""

    authentication_classes = [UploadTokenAuthentication, TokenAuthentication]
    permission_classes = [UploadPermission]
    parser_classes = [BundleBodyParser]
    body_cap = BodyCap(MAX_BUNDLE_UPLOAD_BYTES, "bundle", "bundle")

    @extend_schema(
        request={
            "application/gzip": {"type": "string", "format": "binary"},
            "application/octet-stream": {"type": "string", "format": "binary"},
        },
        responses={201: PushReceiptSerializer},
    )
    def post(self, request, pk: int):
        """Store the bundle (the request body, at most 512 MiB, read within the limits of an
        import) in the snapshot of the incident that waits for its nodes. Authenticated by
        the snapshot's upload token (`Bearer hds_...`), or a responder's API token (then a
        waiting snapshot is started when there is none)."""
        incident = get_object_or_404(Incident.objects.select_related("cluster"), pk=pk)
        incident_require_open(incident)
        snapshot = self._snapshot(request, incident)
        _refuse_over_cap(request)
        evidence = read_bundle_fileobj(_spooled_body(request))  # refused: 400 {"bundle": why}
        by = request.user if request.user is not None and request.user.is_authenticated else None
        received = starts.push_bundle_receive(snapshot=snapshot, evidence=evidence, by=by)
        return Response(PushReceiptSerializer(received).data, status=status.HTTP_201_CREATED)

    def _snapshot(self, request, incident: Incident) -> Snapshot:
        if isinstance(request.auth, UploadGrant):
            if request.auth.snapshot.incident_id != incident.pk:
                raise Forbidden(
                    f"This upload token is for snapshot {request.auth.snapshot.pk} of "
                    f"incident {request.auth.snapshot.incident_id}, not {incident.reference}."
                )
            return request.auth.snapshot
        if incident.cluster.source != ClusterSource.PUSH:
            raise Conflict(
                f"Cluster {incident.cluster.name} is not a push cluster: its snapshots visit "
                "the nodes. Import a whole bundle instead (POST .../bundles/).",
                field="bundle",
            )
        snapshot = push.waiting_snapshot(incident)
        if snapshot is None:
            snapshot, _ = starts.snapshot_start(incident=incident, by=request.user, source="push")
        if not snapshot.waits_for_uploads:
            state = snapshot.get_status_display()
            raise push.UploadRefused(
                f"Snapshot {snapshot.pk} of {incident.reference} is {state}: upload once it is "
                "done, into the next one."
            )
        return snapshot


def _spooled_body(request):
    """The request body, copied in bounded pieces into a seekable spool (memory up to 8 MiB,
    then a temporary file), so the bundle reader can look at its first bytes."""
    stream = request.stream
    if stream is None:
        raise Invalid(
            "Send the bundle as the request body (Content-Type: application/gzip), e.g. "
            "`hangdesk upload FILE --incident ID`.",
            field="bundle",
        )
    spool = tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115 - returned, open
    copied = 0
    while chunk := stream.read(1 << 20):
        copied += len(chunk)
        if copied > MAX_BUNDLE_UPLOAD_BYTES:
            spool.close()
            raise TooLarge(_over_cap_message(copied), field="bundle")
        spool.write(chunk)
    spool.seek(0)
    return spool
