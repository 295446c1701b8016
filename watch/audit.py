"""What the audit log records about the watch: who turned it on or off, who pointed its page
somewhere else, who issued a heartbeat token (core.services.audit_record). A webhook URL
often holds its receiver's secret in the path, so the log names its host and a fingerprint."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from core.models import AuditAction
from core.services import audit_record

from .models import Watch


def url_shown(url: str) -> str:
    """`https://hooks.slack.com/… (sha256 1a2b3c4d)`; "none" for no URL."""
    if not url:
        return "none"
    try:
        parts = urlsplit(url)
        head = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:
        head = "an unreadable URL"
    return f"{head}/… (sha256 {hashlib.sha256(url.encode()).hexdigest()[:8]})"


def watch_changed(*, watch: Watch, by, before: dict, via: str, ip: str | None) -> None:
    """One row per save that changed whether the watch runs or where its page goes."""
    changes = []
    if before["enabled"] != watch.enabled:
        changes.append("turned on" if watch.enabled else "turned off")
    if before["webhook_url"] != watch.webhook_url:
        changes.append(
            f"webhook {url_shown(before['webhook_url'])} -> {url_shown(watch.webhook_url)}"
        )
    if changes:
        audit_record(
            user=by,
            action=AuditAction.WATCH_CHANGED,
            target=f"watch of {watch.cluster.name}: " + "; ".join(changes),
            via=via,
            ip=ip,
        )


def heartbeat_token_issued(*, watch: Watch, by, prefix: str, via: str, ip: str | None) -> None:
    audit_record(
        user=by,
        action=AuditAction.HEARTBEAT_TOKEN,
        target=f"heartbeat token {prefix}… for {watch.cluster.name} (the old one stops working)",
        via=via,
        ip=ip,
    )
