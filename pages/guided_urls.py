from django.urls import path

from . import guided

# The guided workflow's verbs and evidence pages, served in the `pages` namespace.
urlpatterns = [
    path(
        "incidents/<int:pk>/snapshots/<int:snapshot_pk>/guided/",
        guided.guided_answer,
        name="guided_answer",
    ),
    path(
        "incidents/<int:pk>/snapshots/<int:snapshot_pk>/ranks/<int:rank>/",
        guided.guided_rank,
        name="guided_rank",
    ),
    path(
        "incidents/<int:pk>/snapshots/<int:snapshot_pk>/environment/",
        guided.guided_env,
        name="guided_env",
    ),
    path("incidents/<int:pk>/resolve-and-write/", guided.guided_resolve, name="guided_resolve"),
]
