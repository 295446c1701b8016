"""/api/v1/: token or session authenticated; the OpenAPI schema at /api/schema/."""

from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from clusters import apis as cluster_apis
from collectors import apis as snapshot_apis
from collectors import progress_apis
from incidents import apis as incident_apis
from pages import apis as page_apis
from watch import apis as watch_apis


def api(view_class):
    # The API answers 401/403 itself; the site-wide login redirect is for pages.
    return login_not_required(view_class.as_view())


urlpatterns = [
    path("schema/", api(SpectacularAPIView), name="api-schema"),
    # Pages to read the schema, behind the site's login like every page.
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api-schema")),
        name="api-docs",
    ),
    path(
        "redoc/",
        login_required(SpectacularRedocView.as_view(url_name="api-schema")),
        name="api-redoc",
    ),
    path("v1/clusters/", api(cluster_apis.ClusterListApi), name="api-clusters"),
    path("v1/clusters/<slug:name>/", api(cluster_apis.ClusterDetailApi), name="api-cluster"),
    path("v1/clusters/<slug:name>/nodes/", api(cluster_apis.NodeListApi), name="api-nodes"),
    path(
        "v1/clusters/<slug:name>/nodes/<str:node>/",
        api(cluster_apis.NodeDetailApi),
        name="api-node",
    ),
    path(
        "v1/clusters/<slug:name>/heartbeat/",
        api(watch_apis.HeartbeatApi),
        name="api-watch-heartbeat",
    ),
    path("v1/incidents/", api(page_apis.IncidentListApi), name="api-incidents"),
    path("v1/incidents/<int:pk>/", api(incident_apis.IncidentDetailApi), name="api-incident"),
    path(
        "v1/incidents/<int:pk>/status/",
        api(incident_apis.IncidentStatusApi),
        name="api-incident-status",
    ),
    path(
        "v1/incidents/<int:pk>/notes/", api(incident_apis.IncidentNoteApi), name="api-incident-note"
    ),
    path(
        "v1/incidents/<int:pk>/postmortem/",
        api(incident_apis.PostMortemApi),
        name="api-postmortem",
    ),
    path(
        "v1/incidents/<int:pk>/snapshots/",
        api(snapshot_apis.SnapshotStartApi),
        name="api-snapshot-start",
    ),
    path(
        "v1/snapshots/<int:snapshot_pk>/", api(progress_apis.SnapshotDetailApi), name="api-snapshot"
    ),
    path(
        "v1/snapshots/<int:snapshot_pk>/nodes/",
        api(progress_apis.SnapshotNodesApi),
        name="api-snapshot-nodes",
    ),
    path(
        "v1/snapshots/<int:snapshot_pk>/diagnosis/",
        api(snapshot_apis.SnapshotDiagnosisApi),
        name="api-diagnosis",
    ),
    path(
        "v1/snapshots/<int:snapshot_pk>/ranks/",
        api(snapshot_apis.SnapshotRanksApi),
        name="api-ranks",
    ),
    path(
        "v1/incidents/<int:pk>/bundles/",
        api(snapshot_apis.BundleImportApi),
        name="api-bundle-import",
    ),
    path(
        "v1/incidents/<int:pk>/uploads/",
        api(snapshot_apis.PushUploadApi),
        name="api-push-upload",
    ),
    path(
        "v1/snapshots/<int:snapshot_pk>/bundle/",
        api(snapshot_apis.BundleExportApi),
        name="api-bundle-export",
    ),
]
