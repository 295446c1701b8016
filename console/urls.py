from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from core.views import ThrottledLoginView

from .metrics import metrics

urlpatterns = [
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("metrics", metrics, name="metrics"),
    path("api/", include("console.api_urls")),
    path("clusters/", include("clusters.urls")),
    path("clusters/", include("watch.urls")),
    path("", include("collectors.urls")),
    path("", include("sharing.urls")),
    path("", include("incidents.urls")),
    path("", include("pages.urls")),
]
