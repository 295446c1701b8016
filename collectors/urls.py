from django.urls import path

from . import views

app_name = "collectors"
urlpatterns = [
    path("incidents/<int:pk>/snapshots/", views.snapshot_start, name="start"),
    path("incidents/<int:pk>/bundles/", views.bundle_import, name="bundle_import"),
    path("snapshots/<int:snapshot_pk>/", views.snapshot_detail, name="detail"),
    path("snapshots/<int:snapshot_pk>/bundle/", views.bundle_export, name="bundle_export"),
    path("snapshots/<int:snapshot_pk>/progress/", views.snapshot_progress, name="progress"),
    path("snapshots/<int:snapshot_pk>/ranks/", views.snapshot_ranks, name="ranks"),
    path("snapshots/<int:snapshot_pk>/decision/", views.snapshot_decide, name="decide"),
    path("snapshots/<int:snapshot_pk>/upload-token/", views.upload_token_new, name="upload_token"),
    path("snapshots/<int:snapshot_pk>/analyse/", views.snapshot_analyse_now, name="analyse_now"),
    path(
        "snapshots/<int:snapshot_pk>/artifacts/<int:artifact_pk>/",
        views.artifact_raw,
        name="artifact",
    ),
    # The same view, as a page: line numbers, the verdict's quoted lines marked, search.
    path(
        "snapshots/<int:snapshot_pk>/artifacts/<int:artifact_pk>/view/",
        views.artifact_raw,
        {"as_page": True},
        name="artifact_view",
    ),
    # The same view again, finding the artifact that holds the verdict's evidence line.
    path(
        "snapshots/<int:snapshot_pk>/evidence/<int:quote>/",
        views.artifact_raw,
        name="quote",
    ),
]
