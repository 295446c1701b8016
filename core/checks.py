"""System checks (`manage.py check`, and every command that runs them)."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Warning, register


@register()
def old_setting_names(app_configs, **kwargs) -> list[Warning]:
    if not getattr(settings, "WATCH_WEBHOOK_HOSTS", None):
        return []
    return [
        Warning(
            "HANGDESK_WATCH_WEBHOOK_HOSTS is the old name of HANGDESK_EGRESS_ALLOW.",
            hint="Its hosts are permitted and webhooks still go only to them; move them to "
            "HANGDESK_EGRESS_ALLOW (docs/operations.md, 'Outbound connections').",
            id="hangdesk.W001",
        )
    ]
