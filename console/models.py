from django.db import models


class WorkerHeartbeat(models.Model):
    """Last time each Celery worker proved it can run tasks (written by a beat task).

    Snapshots need a live worker; pages warn when none has been seen recently.
    """

    hostname = models.CharField(max_length=255, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%H:%M:%S}"
