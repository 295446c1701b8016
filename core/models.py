from datetime import datetime

from django.conf import settings
from django.db import models


class WorkerHeartbeat(models.Model):
    """Last time each Celery worker proved it can run tasks (written by a beat task).

    Snapshots need a live worker; pages warn when none has been seen recently.
    """

    hostname = models.CharField(max_length=255, unique=True)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "console_workerheartbeat"  # created by console's migrations, kept as it is

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%H:%M:%S}"


class ApiToken(models.Model):
    """A personal API token. Only its SHA-256 is stored; the token is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="what uses it, e.g. 'job watchdog'")
    key_hash = models.CharField(max_length=64, unique=True)
    # The first characters, so a person can tell tokens apart without the secret.
    prefix = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Null: never expires (only when asked for explicitly).
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["-created_at"]
        db_table = "console_apitoken"  # created by console's migrations, kept as it is

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name}) for {self.user}"

    def state_at(self, now: datetime) -> str:
        """`active`, `revoked` or `expired`."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


class AuditAction(models.TextChoices):
    RAW_EVIDENCE_READ = "raw_evidence_read", "Read raw evidence"
    BUNDLE_EXPORT = "bundle_export", "Exported a bundle"
    RAW_BUNDLE_EXPORT = "raw_bundle_export", "Exported a raw bundle"
    TOKEN_CREATED = "token_created", "Created an API token"
    TOKEN_REVOKED = "token_revoked", "Revoked an API token"
    LOGIN_LOCKED = "login_locked", "Login locked out"
    WATCH_CHANGED = "watch_changed", "Changed a cluster's watch"
    HEARTBEAT_TOKEN = "heartbeat_token", "Issued a watch heartbeat token"


class AuditEvent(models.Model):
    """Who read raw evidence, who exported what, who made or revoked a token.

    Written by services only; append-only in the admin. The incident and snapshot are kept as
    plain numbers: core is the lowest floor and knows no incident model.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept when the user is deleted.
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices)
    target = models.CharField(max_length=500, help_text="what was read or exported")
    incident_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    snapshot_id = models.BigIntegerField(null=True, blank=True)
    via = models.CharField(max_length=16, blank=True, help_text="page, api or command")
    ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username or '-'} {self.action} {self.target}"


class LoginFailure(models.Model):
    """One failed login, kept for the throttle's window (core/throttle.py)."""

    username = models.CharField(max_length=150)
    ip = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["username", "ip", "at"])]

    def __str__(self) -> str:
        return f"{self.username} from {self.ip} at {self.at:%H:%M:%S}"
