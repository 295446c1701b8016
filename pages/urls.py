from django.urls import path

from . import guided_urls, nodes, opening, postmortem_urls, views

# The `pages` namespace: the pages that show an incident together with its snapshots, its
# post-mortem pages, the guided workflow's, and the node forms that ask a worker.
app_name = "pages"
urlpatterns = [
    path("", views.incident_list, name="incident_list"),
    path("incidents/new/", opening.incident_open, name="incident_open"),
    path("incidents/<int:pk>/", views.incident_detail, name="incident"),
    path("incidents/<int:pk>/live/", views.incident_live, name="incident_live"),
    *postmortem_urls.urlpatterns,
    *guided_urls.urlpatterns,
    path("clusters/<slug:name>/nodes/add/", nodes.node_add, name="node_add"),
    path("clusters/<slug:name>/nodes/<int:node_pk>/test/", nodes.node_test, name="node_test"),
]
