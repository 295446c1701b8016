from django.contrib import admin

from .models import Incident, TimelineEvent


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "cluster", "severity", "status", "opened_at"]
    list_filter = ["status", "severity", "cluster"]
    search_fields = ["title"]


@admin.register(TimelineEvent)
class TimelineEventAdmin(admin.ModelAdmin):
    list_display = ["incident", "at", "kind", "summary", "pinned"]
    list_filter = ["kind", "pinned"]
