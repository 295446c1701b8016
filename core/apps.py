from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core: roles, API tokens, audit log, worker heartbeat"

    def ready(self) -> None:
        from django.conf import settings

        from hangdesk import masking

        from . import checks, signals  # noqa: F401 - checks registers itself

        # The installation's key: every process fingerprints a secret alike (hangdesk/masking).
        if settings.SECRET_KEY:
            masking.set_default_key(masking.console_key(settings.SECRET_KEY))
        signals.connect()
