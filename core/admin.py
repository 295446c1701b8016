"""Tokens and the audit log in the admin site (the admin role's group holds the permissions)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from .errors import AppError
from .models import ApiToken, AuditEvent, LoginFailure
from .services import api_token_create, api_token_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "user", "state", "created_at", "last_used_at", "expires_at")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("name", "prefix", "user__username")
    actions = ("revoke",)
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "expires_at", "revoked_at")

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        return token.state_at(timezone.now())

    def get_readonly_fields(self, request, obj=None):
        # Made here (the secret is shown once); afterwards only revoked, never edited.
        return self.readonly_fields if obj is None else self.fields

    def save_model(self, request, obj, form, change):
        if change:
            return
        token, secret = api_token_create(
            user=form.cleaned_data["user"],
            name=form.cleaned_data["name"],
            by=request.user,
            via="admin",
        )
        obj.pk = token.pk
        messages.warning(request, f"The token is {secret} — copy it now: it is not shown again.")

    @admin.action(description="Revoke the selected tokens now")
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True).select_related("user"):
            try:
                api_token_revoke(token=token, by=request.user, via="admin")
            except AppError:
                continue
            revoked += 1
        messages.success(request, f"{revoked} token(s) revoked.")

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row says who made it and when it was last used


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ("at", "username", "action", "target", "incident_id", "via", "ip")
    list_filter = ("action", "via")
    search_fields = ("username", "target")
    date_hierarchy = "at"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(LoginFailure)
class LoginFailureAdmin(admin.ModelAdmin):
    """Failed logins in the throttle's window; deleting a user's rows lifts their lock."""

    list_display = ("at", "username", "ip")
    search_fields = ("username", "ip")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
