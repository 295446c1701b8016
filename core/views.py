"""The login page, throttled (core/throttle.py): a locked pair gets 429 and says so."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

from . import throttle


class ThrottledLoginView(auth_views.LoginView):
    def form_invalid(self, form):
        response = super().form_invalid(form)
        if throttle.is_locked(form.data.get("username"), self.request):
            minutes = throttle.retry_after_seconds() // 60
            response.context_data["locked_minutes"] = minutes
            response.status_code = 429
            response["Retry-After"] = str(throttle.retry_after_seconds())
        return response
