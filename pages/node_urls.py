from django.urls import path

from . import nodes

# Node forms that ask a worker (pages/nodes.py), beside the clusters app's own routes.
app_name = "nodes"
urlpatterns = [
    path("<slug:name>/nodes/add/", nodes.node_add, name="add"),
    path("<slug:name>/nodes/<int:node_pk>/test/", nodes.node_test, name="test"),
]
