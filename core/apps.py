from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, API tokens, audit log, worker heartbeat"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401 - checks registers itself
        from .masking import configure_masking

        configure_masking()
        signals.connect()
