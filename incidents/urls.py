from django.urls import path

from . import views

app_name = "incidents"
urlpatterns = [
    path("", views.incident_list, name="list"),
    path("incidents/new/", views.incident_open, name="open"),
    path("incidents/<int:pk>/", views.incident_detail, name="detail"),
    path("incidents/<int:pk>/status/", views.incident_change_status, name="status"),
    path("incidents/<int:pk>/notes/", views.incident_add_note, name="note"),
    path("incidents/<int:pk>/edit/", views.incident_edit, name="edit"),
    path("incidents/<int:pk>/postmortem/", views.incident_postmortem, name="postmortem"),
    path("incidents/<int:pk>/events/<int:event_pk>/pin/", views.event_toggle_pin, name="pin"),
]
