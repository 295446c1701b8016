from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from collectors.remote import DEFAULT_PROCESS_PATTERN

from .validators import (
    validate_globs,
    validate_host_key,
    validate_process_pattern,
    validate_remote_host,
)


class Cluster(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    process_pattern = models.CharField(
        max_length=500,
        default=DEFAULT_PROCESS_PATTERN,
        validators=[validate_process_pattern],
        help_text="POSIX extended regular expression matched against process command lines.",
    )
    expected_world_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="Total ranks of the job, when known."
    )
    log_globs = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_globs],
        help_text="Absolute path globs of training and NCCL logs on the nodes.",
    )
    flight_recorder_globs = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_globs],
        help_text="Absolute path globs of PyTorch flight-recorder dumps.",
    )
    pyspy_command = models.CharField(
        max_length=500, default="py-spy", help_text="py-spy as invoked on the nodes."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("clusters:detail", args=[self.name])


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=128)
    address = models.CharField(max_length=253, validators=[validate_remote_host])
    port = models.PositiveIntegerField(default=22)
    username = models.CharField(max_length=64, default="root")
    # Where the worker finds the private key; the key itself never enters the database.
    # Empty means: ask the worker's ssh-agent.
    key_path = models.CharField(max_length=500, blank=True)
    host_key = models.TextField(
        validators=[validate_host_key],
        help_text="The node's public host key, as one known_hosts-style line "
        "(for example: ssh-ed25519 AAAAC3...). Connections to any other key are refused.",
    )

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "name"], name="unique_node_name_per_cluster"
            ),
            models.CheckConstraint(
                condition=models.Q(port__gte=1, port__lte=65535), name="node_port_in_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.username}@{self.address}:{self.port})"


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
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        related_name="opened_incidents",
    )
    opened_at = models.DateTimeField(auto_now_add=True)
    status_changed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-opened_at"]
        indexes = [models.Index(fields=["status", "severity"])]

    def __str__(self) -> str:
        return f"{self.reference}: {self.title}"

    def get_absolute_url(self) -> str:
        return reverse("incidents:detail", args=[self.pk])

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


class PostMortem(models.Model):
    """What the incident was, written once the fire is out; the pinned timeline comes with it."""

    incident = models.OneToOneField(Incident, on_delete=models.CASCADE, related_name="postmortem")
    summary = models.TextField(help_text="What happened, in two or three sentences.")
    impact = models.TextField(blank=True, help_text="GPU-hours lost, steps redone, who waited.")
    classification = models.CharField(
        max_length=16, blank=True, help_text="The hang's class: A, B, C, straggler, init, ..."
    )
    root_cause = models.TextField(blank=True)
    detection = models.TextField(
        blank=True, help_text="How it was noticed, and how long that took."
    )
    resolution = models.TextField(blank=True)
    action_items = models.TextField(blank=True, help_text="One per line.")
    written_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"post-mortem of {self.incident.reference}"

    def get_absolute_url(self) -> str:
        return reverse("incidents:postmortem", args=[self.incident_id])

    @property
    def action_item_list(self) -> list[str]:
        return [line.strip() for line in self.action_items.splitlines() if line.strip()]
