from django.urls import path

from . import views

# The incidents app's own routes: an incident's forms (the pages that show an incident with its
# snapshots are pages/'s).
app_name = "incidents"
urlpatterns = [
    path("incidents/<int:pk>/status/", views.incident_change_status, name="status"),
    path("incidents/<int:pk>/notes/", views.incident_add_note, name="note"),
    path("incidents/<int:pk>/edit/", views.incident_edit, name="edit"),
    path("incidents/<int:pk>/acknowledge/", views.incident_acknowledge, name="acknowledge"),
    path("incidents/<int:pk>/events/<int:event_pk>/pin/", views.event_toggle_pin, name="pin"),
]
