"""A cluster's watch: its settings, the job's progress as last read, pushed heartbeats, the
raises it made, preflight results.

One `Watch` per cluster. The periodic task claims it with a conditional UPDATE (`claim` and
`claimed_until`), so at most one watch task per cluster is in flight whatever the number of
beat ticks, workers or redeliveries; a raise is a `WatchRaise` row, and a partial unique index
allows one open raise per watch, so a hang opens (or joins) one incident, never a storm.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from clusters.models import Cluster
from collectors.models import Snapshot
from incidents.models import Incident

from .webhooks import validate_webhook_url


class WatchState(models.TextChoices):
    OFF = "off", "Off"
    WAITING = "waiting", "Waiting for the first step"
    OK = "ok", "Progressing"
    SLOW = "slow", "Slow (still progressing)"
    STALLED = "stalled", "Stalled"
    GONE = "gone", "A training process disappeared"
    INIT = "init", "Stuck in init (no first step)"
    IDLE = "idle", "No training process running"
    UNREACHABLE = "unreachable", "Nodes unreachable"


class Watch(models.Model):
    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="watch")
    enabled = models.BooleanField(default=False)
    # --- settings (per cluster) ---
    step_time_multiplier = models.FloatField(
        default=5.0, help_text="A step older than this many learned step times is a hang."
    )
    floor_s = models.FloatField(
        default=120.0, help_text="Never raise before the last step is at least this old (s)."
    )
    checkpoint_allowance_s = models.FloatField(
        default=900.0, help_text="Extra time (s) while a checkpoint is being written."
    )
    init_threshold_s = models.FloatField(
        default=600.0,
        help_text="No first step this long (s) after the training processes started is an init "
        "hang (the floor, once every rank is seen inside init_process_group).",
    )
    # On a Slurm cluster: the job watched. Each period reads it first (its nodes, its state);
    # a job that ended stops the watch, one RUNNING with no step for the floor is stalled.
    slurm_job = models.CharField(max_length=64, blank=True)
    job_no_step_since = models.DateTimeField(null=True, blank=True)
    step_nodes = models.JSONField(
        default=list,
        blank=True,
        help_text="Nodes whose logs carry step lines; empty: learned (the first that has them).",
    )
    webhook_url = models.CharField(
        max_length=500, blank=True, validators=[validate_webhook_url],
        help_text="Slack-compatible incoming webhook (JSON POST) told of every raise.",
    )  # fmt: skip
    # On-call pagers told of every raise beside the webhook, resolved with the incident
    # (watch/pagers.py). Secrets an admin sets: never shown back, never logged.
    pagerduty_routing_key = models.CharField(
        max_length=64, blank=True, help_text="PagerDuty Events API v2 integration (routing) key."
    )
    opsgenie_api_key = models.CharField(
        max_length=128, blank=True, help_text="Opsgenie API integration key (GenieKey)."
    )
    # The job's own heartbeats authenticate with this token (only its SHA-256 is kept).
    heartbeat_token_hash = models.CharField(max_length=64, blank=True, db_index=True)
    heartbeat_token_prefix = models.CharField(max_length=12, blank=True)
    # --- the claim: one watch task in flight per cluster ---
    claim = models.CharField(max_length=64, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)  # the last claim's time
    # When the logs of every node were last searched for step lines (none known to have them).
    log_search_at = models.DateTimeField(null=True, blank=True)
    # --- what the last read found ---
    state = models.CharField(max_length=16, choices=WatchState.choices, default=WatchState.OFF)
    state_reason = models.CharField(max_length=500, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    last_step_at = models.DateTimeField(null=True, blank=True)
    step_time_s = models.FloatField(null=True, blank=True, help_text="learned normal step time")
    recent_step_time_s = models.FloatField(null=True, blank=True)
    step_times = models.JSONField(default=list, blank=True)  # recent normal steps (bounded)
    threshold_s = models.FloatField(null=True, blank=True)
    checkpoint_since = models.DateTimeField(null=True, blank=True)
    # node name -> {"pids": [...], "seen_at", "error", "steps", "bytes", "seconds"}
    nodes = models.JSONField(default=dict, blank=True)
    last_raise_at = models.DateTimeField(null=True, blank=True)
    enabled_at = models.DateTimeField(null=True, blank=True)
    # A "Run preflight" in flight (its claim, held until the task ends or the lease runs out):
    # a second click queues nothing (watch/limits.py).
    preflight_claim = models.CharField(max_length=64, blank=True)
    preflight_until = models.DateTimeField(null=True, blank=True)
    # The job's heartbeats in the current second (watch/limits.py: over the limit, 429).
    heartbeat_window_at = models.DateTimeField(null=True, blank=True)
    heartbeat_window_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["cluster__name"]
        verbose_name_plural = "watches"

    def __str__(self) -> str:
        return f"watch of {self.cluster.name} ({'on' if self.enabled else 'off'})"


class StepSample(models.Model):
    """The job's global step as the watch saw it, one row per period (the last hour's chart);
    rows older than the chart are deleted by the watch itself."""

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="samples")
    at = models.DateTimeField()
    step = models.BigIntegerField()

    class Meta:
        ordering = ["at"]
        indexes = [models.Index(fields=["watch", "at"])]

    def __str__(self) -> str:
        return f"step {self.step} at {self.at:%H:%M:%S}"


class Heartbeat(models.Model):
    """The last heartbeat a job pushed, per rank (-1: no rank given)."""

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="heartbeats")
    rank = models.IntegerField(default=-1)
    step = models.BigIntegerField()
    at = models.DateTimeField()
    checkpoint = models.BooleanField(default=False)
    # Seconds per step between this rank's last two heartbeats (None until two arrived).
    step_time_s = models.FloatField(null=True, blank=True)
    node = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ["rank"]
        constraints = [
            models.UniqueConstraint(fields=["watch", "rank"], name="one_heartbeat_per_rank")
        ]

    def __str__(self) -> str:
        return f"rank {self.rank}: step {self.step} at {self.at:%H:%M:%S}"


class RaiseReason(models.TextChoices):
    STALLED = "stalled", "Stalled"
    GONE = "gone", "Process disappeared"
    INIT = "init", "Stuck in init"


class NotifyStatus(models.TextChoices):
    NONE = "none", "No webhook"
    WAITING = "waiting", "Waiting for the verdict"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"


class WatchRaise(models.Model):
    """One hang the watch noticed: its incident, its two snapshots, its verdict, its page."""

    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="raises")
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="watch_raises")
    reason = models.CharField(max_length=16, choices=RaiseReason.choices)
    summary = models.CharField(max_length=500)
    raised_at = models.DateTimeField()
    step = models.BigIntegerField(null=True, blank=True)
    step_at = models.DateTimeField(null=True, blank=True)
    threshold_s = models.FloatField(null=True, blank=True)
    first_snapshot = models.ForeignKey(
        Snapshot, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    second_snapshot = models.ForeignKey(
        Snapshot, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    first_claim = models.CharField(max_length=64, blank=True)
    second_claim = models.CharField(max_length=64, blank=True)
    verdict = models.JSONField(null=True, blank=True)
    verdict_at = models.DateTimeField(null=True, blank=True)
    notify_status = models.CharField(
        max_length=16, choices=NotifyStatus.choices, default=NotifyStatus.NONE
    )
    notify_attempts = models.PositiveSmallIntegerField(default=0)
    notify_error = models.CharField(max_length=500, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    # pager -> "sent", "failed" or "resolved" (watch/pagers.py): what its incident's end resolves.
    paged = models.JSONField(default=dict, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-raised_at"]
        constraints = [
            # Whatever the ticks, workers or redeliveries: one open raise per watch.
            models.UniqueConstraint(
                fields=["watch"], condition=Q(closed_at__isnull=True), name="one_open_raise"
            )
        ]

    def __str__(self) -> str:
        return f"raise of {self.watch.cluster.name} at {self.raised_at:%H:%M:%S}: {self.reason}"


class PreflightRun(models.Model):
    """A comparison of every rank's environment, the nodes' shell start-up files and NCCL's
    reported configuration (preflight.py)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="preflights")
    at = models.DateTimeField()
    source = models.CharField(max_length=32)  # "ssh" or "snapshot <pk>"
    ok = models.BooleanField()
    report = models.JSONField()

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        verdict = "ok" if self.ok else "ranks differ"
        return f"preflight of {self.cluster.name} at {self.at:%H:%M:%S}: {verdict}"
