from django.urls import path

from . import postmortems

# The post-mortem pages, served in the `pages` namespace by pages/urls.py.
urlpatterns = [
    path("incidents/<int:pk>/postmortem/", postmortems.postmortem_page, name="postmortem"),
    path(
        "incidents/<int:pk>/postmortem/preview/",
        postmortems.postmortem_preview,
        name="postmortem_preview",
    ),
    path(
        "incidents/<int:pk>/postmortem/versions/",
        postmortems.postmortem_versions,
        name="postmortem_versions",
    ),
]
