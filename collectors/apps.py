from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Evidence collection"

    def ready(self) -> None:
        # A node an admin added or changed is checked in the background (collectors/tasks.py).
        from clusters.signals import node_connection_changed

        from .tasks import node_check_queue

        node_connection_changed.connect(node_check_queue, dispatch_uid="collectors.node_check")
