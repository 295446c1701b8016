from django.urls import path

from . import views

app_name = "sharing"
urlpatterns = [
    path("s/<str:token>/", views.shared, name="shared"),
    path("incidents/<int:pk>/share/", views.share_links, name="links"),
    path(
        "incidents/<int:pk>/share/<int:link_pk>/revoke/",
        views.share_link_revoke,
        name="revoke",
    ),
    path("incidents/<int:pk>/postmortem/export.md", views.export_markdown, name="export"),
    path("incidents/<int:pk>/postmortem/print/", views.print_page, name="print"),
]
