from django.contrib import admin

from .models import PreflightRun, Watch, WatchRaise


@admin.register(Watch)
class WatchAdmin(admin.ModelAdmin):
    list_display = ["cluster", "enabled", "state", "last_step", "step_time_s", "checked_at"]
    list_filter = ["enabled", "state"]
    exclude = ["heartbeat_token_hash"]
    readonly_fields = ["claim", "claimed_until", "dispatched_at", "heartbeat_token_prefix"]


@admin.register(WatchRaise)
class WatchRaiseAdmin(admin.ModelAdmin):
    list_display = ["watch", "reason", "raised_at", "incident", "notify_status", "closed_at"]
    list_filter = ["reason", "notify_status"]


@admin.register(PreflightRun)
class PreflightRunAdmin(admin.ModelAdmin):
    list_display = ["cluster", "at", "source", "ok"]
