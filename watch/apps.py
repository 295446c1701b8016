from django.apps import AppConfig


def _resolve_pages(*, incident, **kwargs) -> None:
    """incidents' incident_resolved (after the commit): the pagers its raises paged are
    resolved by a task (imported here, so commands that resolve nothing start without Celery)."""
    from .tasks import pages_resolve_queue

    pages_resolve_queue(incident.pk)


class WatchConfig(AppConfig):
    name = "watch"
    verbose_name = "Watch"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from incidents.signals import incident_resolved

        incident_resolved.connect(_resolve_pages, dispatch_uid="watch.resolve_pages")
