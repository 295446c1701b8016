from django.contrib import admin

from .models import Cluster, Node


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "expected_world_size", "created_at"]
    inlines = [NodeInline]
