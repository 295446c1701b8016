from django.apps import AppConfig


def _node_check_queue(**kwargs) -> None:
    """clusters' node_connection_changed: the task module (and Celery with it) is imported
    only when a node changed, so commands that never change one (`manage.py diagnose
    --bundle`) start without Celery (tests/snapshots/test_diagnose_offline.py)."""
    from .tasks import node_check_queue

    node_check_queue(**kwargs)


class CollectorsConfig(AppConfig):
    name = "collectors"
    verbose_name = "Evidence collection"

    def ready(self) -> None:
        # A node an admin added or changed is checked in the background (collectors/tasks.py).
        from clusters.signals import node_connection_changed

        node_connection_changed.connect(_node_check_queue, dispatch_uid="collectors.node_check")
