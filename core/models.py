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

    class Meta:
        ordering = ["-created_at"]
        db_table = "console_apitoken"  # created by console's migrations, kept as it is

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name}) for {self.user}"
