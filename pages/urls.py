from django.urls import path

from incidents import urls as incident_urls

from . import guided_urls, opening, postmortem_urls, views

# The `incidents` namespace: the pages that also show snapshots, composed here, and the
# incidents app's own routes (opening an incident, its forms).
app_name = "incidents"
urlpatterns = [
    path("", views.incident_list, name="list"),
    path("incidents/new/", opening.incident_open, name="open"),
    path("incidents/<int:pk>/", views.incident_detail, name="detail"),
    path("incidents/<int:pk>/live/", views.incident_live, name="live"),
    *postmortem_urls.urlpatterns,
    *guided_urls.urlpatterns,
    *incident_urls.urlpatterns,
]
