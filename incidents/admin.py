from django.contrib import admin

from .models import Cluster, Incident, Node, TimelineEvent


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "expected_world_size", "created_at"]
    inlines = [NodeInline]


@admin.register(Incident)
class IncidentAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "cluster", "severity", "status", "opened_at"]
    list_filter = ["status", "severity", "cluster"]
    search_fields = ["title"]


@admin.register(TimelineEvent)
class TimelineEventAdmin(admin.ModelAdmin):
    list_display = ["incident", "at", "kind", "summary", "pinned"]
    list_filter = ["kind", "pinned"]
