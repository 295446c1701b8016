from django.urls import path

from . import views

app_name = "watch"
urlpatterns = [
    path("<slug:name>/watch/", views.watch_panel, name="panel"),
    path("<slug:name>/watch/form/", views.watch_settings_form, name="settings_form"),
    path("<slug:name>/watch/settings/", views.watch_settings, name="settings"),
    path("<slug:name>/watch/token/", views.heartbeat_token, name="token"),
    path("<slug:name>/watch/preflight/", views.preflight_start, name="preflight"),
]
