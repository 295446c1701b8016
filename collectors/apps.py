from django.apps import AppConfig


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Evidence collection"

    def ready(self) -> None:
        # A node an admin added or changed is checked in the background (collectors/tasks.py).
        from clusters.signals import node_connection_changed

        node_connection_changed.connect(_queue_node_check, dispatch_uid="collectors.node_check")


def _queue_node_check(*, sender, node, **kwargs) -> None:
    """clusters' node_connection_changed (sent after the commit): queue the check. Celery is
    imported here, not at start-up: `diagnose --bundle` loads no Celery."""
    from .tasks import node_check_record

    node_check_record.delay(node.pk)
