from django.urls import path

from . import views

app_name = "clusters"
urlpatterns = [
    path("", views.cluster_list, name="list"),
    path("new/", views.cluster_create, name="create"),
    path("<slug:name>/", views.cluster_detail, name="detail"),
    path("<slug:name>/edit/", views.cluster_edit, name="edit"),
    path("<slug:name>/nodes/", views.node_add, name="node_add"),
    path("<slug:name>/node-states/", views.node_states, name="node_states"),
    path("<slug:name>/nodes/<int:node_pk>/delete/", views.node_delete, name="node_delete"),
]
