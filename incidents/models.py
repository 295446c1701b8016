from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from clusters.models import Cluster

from .postmortem_text import parse_action_items


class Severity(models.TextChoices):
    SEV1 = "SEV1", "SEV1 - job down, many GPUs idle"
    SEV2 = "SEV2", "SEV2 - job hung or badly degraded"
    SEV3 = "SEV3", "SEV3 - degraded, progressing"
    SEV4 = "SEV4", "SEV4 - minor"


class Status(models.TextChoices):
    OPEN = "open", "Open"
    INVESTIGATING = "investigating", "Investigating"
    MITIGATED = "mitigated", "Mitigated"
    RESOLVED = "resolved", "Resolved"
    CLOSED = "closed", "Closed"


# The way forward is one step at a time; an incident can be reopened into
# investigation until it is closed.
STATUS_TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.OPEN: (Status.INVESTIGATING, Status.RESOLVED),
    Status.INVESTIGATING: (Status.MITIGATED, Status.RESOLVED),
    Status.MITIGATED: (Status.RESOLVED, Status.INVESTIGATING),
    Status.RESOLVED: (Status.CLOSED, Status.INVESTIGATING),
    Status.CLOSED: (),
}


class Incident(models.Model):
    title = models.CharField(max_length=200)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="incidents")
    severity = models.CharField(max_length=4, choices=Severity.choices, default=Severity.SEV2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    commander = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="commanded_incidents",
    )
    description = models.TextField(blank=True)
    # The scheduler's job this incident is about (a Slurm job id: 4417203, 4417203_7,
    # 4417203+1), when its cluster finds nodes through a scheduler; and the job as last read.
    scheduler_job = models.CharField(max_length=64, blank=True)
    scheduler_job_info = models.JSONField(null=True, blank=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="opened_incidents",
    )
    opened_at = models.DateTimeField(auto_now_add=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    # Bumped by every timeline event and pin: an open page asks "changed since version N?"
    # with one primary-key read (pages/live.py).
    version = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-opened_at"]
        indexes = [models.Index(fields=["status", "severity"])]

    def __str__(self) -> str:
        return f"{self.reference}: {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("pages:incident", args=[self.pk])

    @property
    def reference(self) -> str:
        return f"INC-{self.pk}"

    def next_statuses(self) -> list[tuple[str, str]]:
        return [(s, Status(s).label) for s in STATUS_TRANSITIONS[self.status]]

    @property
    def is_active(self) -> bool:
        return self.status in (Status.OPEN, Status.INVESTIGATING, Status.MITIGATED)


class EventKind(models.TextChoices):
    OPENED = "opened", "Opened"
    STATUS = "status", "Status change"
    NOTE = "note", "Note"
    EDIT = "edit", "Edit"
    SNAPSHOT = "snapshot", "Snapshot"
    DECISION = "decision", "Decision"
    ANSWER = "answer", "Guided answer"
    POSTMORTEM = "postmortem", "Post-mortem"
    SYSTEM = "system", "System"


class TimelineEvent(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    # Who wrote it when no person did ("worker", "api", "lab"...).
    source = models.CharField(max_length=64, blank=True)
    summary = models.CharField(max_length=500)
    details = models.JSONField(default=dict, blank=True)
    pinned = models.BooleanField(default=False)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [models.Index(fields=["incident", "at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}: {self.summary}"

    @property
    def actor(self) -> str:
        if self.author_id:
            return self.author.get_username()
        return self.source or "system"


class PostMortemStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    IN_REVIEW = "in_review", "In review"
    PUBLISHED = "published", "Published"


class PostMortem(models.Model):
    """What the incident was, written once the fire is out: Markdown sections the responders
    write (drafted from what the incident knows), a status, and every save kept as a version.
    The verdict, decisions, pinned timeline and chart come from the incident when shown."""

    incident = models.OneToOneField(Incident, on_delete=models.CASCADE, related_name="postmortem")
    status = models.CharField(
        max_length=16, choices=PostMortemStatus.choices, default=PostMortemStatus.DRAFT
    )
    summary = models.TextField(help_text="What happened, in two or three sentences.")
    impact = models.TextField(blank=True, help_text="GPU-hours lost, steps redone, who waited.")
    classification = models.CharField(
        max_length=16, blank=True, help_text="The hang's class: A, B, C, straggler, init, ..."
    )
    root_cause = models.TextField(blank=True)
    contributing_factors = models.TextField(
        blank=True, help_text="What made it worse or slower to find."
    )
    detection = models.TextField(
        blank=True, help_text="How it was noticed, and how long that took."
    )
    resolution = models.TextField(blank=True)
    action_items = models.TextField(
        blank=True,
        help_text="One per line: what | owner | due date (YYYY-MM-DD).",
    )
    written_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)
    # The number of the newest PostMortemVersion (0: never saved through the service).
    version = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "post-mortem"

    def __str__(self) -> str:
        return f"post-mortem of {self.incident.reference}"

    def get_absolute_url(self) -> str:
        return reverse("pages:postmortem", args=[self.incident_id])

    @property
    def action_item_list(self) -> list[str]:
        """What each action item asks for (owner and due date left out)."""
        return [row["what"] for row in self.action_item_rows]

    @property
    def action_item_rows(self) -> list[dict]:
        return parse_action_items(self.action_items)


class PostMortemVersion(models.Model):
    """One save of a post-mortem: who, when, the status, and every section as it was."""

    postmortem = models.ForeignKey(PostMortem, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=PostMortemStatus.choices)
    content = models.JSONField(default=dict)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "post-mortem version"
        ordering = ["postmortem", "number"]
        constraints = [
            models.UniqueConstraint(
                fields=["postmortem", "number"], name="postmortem_version_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.postmortem} v{self.number}"
