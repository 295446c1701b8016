from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, API tokens, audit log, worker heartbeat"

    def ready(self) -> None:
        from . import signals
        from .masking import configure_masking

        configure_masking()
        signals.connect()
