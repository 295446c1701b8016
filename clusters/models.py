from __future__ import annotations

import contextlib

from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse

from . import sshspec
from .validators import (
    validate_globs,
    validate_host_key,
    validate_metrics_url,
    validate_port,
    validate_process_pattern,
    validate_remote_host,
)


class ClusterSource(models.TextChoices):
    """How a cluster finds the nodes a snapshot visits."""

    NODES = "nodes", "Nodes listed here"
    SLURM = "slurm", "A Slurm job's nodes (asked of the controller)"
    RAY = "ray", "A Ray job's workers (asked of the Ray head)"
    PUSH = "push", "Bundles pushed by the nodes (no SSH)"


# The sources whose nodes a scheduler names: reached through a controller or head over SSH.
SCHEDULER_SOURCES = (ClusterSource.SLURM, ClusterSource.RAY)


# The fields that say where a cluster's nodes come from and how a scheduler is reached.
SOURCE_FIELDS = [
    "source",
    "controller_address",
    "controller_port",
    "controller_username",
    "controller_key_path",
    "controller_host_key",
    "node_port",
    "node_username",
    "node_key_path",
    "known_hosts_path",
    "ray_command",
    "expected_nodes",
]
# Where the cluster's GPU metrics can be read (a Prometheus scraping the DCGM exporter).
METRICS_FIELDS = ["prometheus_url"]


class Cluster(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)
    process_pattern = models.CharField(
        max_length=500,
        default=sshspec.DEFAULT_PROCESS_PATTERN,
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
    source = models.CharField(
        max_length=8,
        choices=ClusterSource.choices,
        default=ClusterSource.NODES,
        help_text="How snapshots find their nodes: this cluster's own list, a Slurm job, "
        "a Ray job, or bundles the nodes push.",
    )
    # The Slurm controller (or login host) or the Ray head, reached over SSH like a node.
    controller_address = models.CharField(
        max_length=253, blank=True, validators=[validate_remote_host]
    )
    controller_port = models.PositiveIntegerField(default=22, validators=[validate_port])
    controller_username = models.CharField(max_length=64, blank=True)
    controller_key_path = models.CharField(
        max_length=500, blank=True, help_text="Private key file on the worker; empty: ssh-agent."
    )
    controller_host_key = models.TextField(
        blank=True,
        validators=[validate_host_key],
        help_text="The controller's or head's public host key (one known_hosts-style line).",
    )
    # How the nodes a scheduler names are reached: their host keys come from a known_hosts
    # file the operator provides on the worker, never from a first connection.
    node_port = models.PositiveIntegerField(default=22, validators=[validate_port])
    node_username = models.CharField(max_length=64, blank=True)
    node_key_path = models.CharField(max_length=500, blank=True)
    known_hosts_path = models.CharField(
        max_length=500,
        blank=True,
        help_text="known_hosts file on the worker holding every node's host key.",
    )
    ray_command = models.CharField(
        max_length=500, default="ray", help_text="The ray CLI as invoked on the Ray head."
    )
    expected_nodes = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Push clusters: how many nodes send a bundle to each snapshot (its analysis "
        "starts when they all have).",
    )
    prometheus_url = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_metrics_url],
        help_text="A Prometheus that scrapes the DCGM exporter on these nodes (e.g. "
        "http://prometheus:9090): the GPU utilisation of the hour before each snapshot.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        db_table = "incidents_cluster"  # created by incidents' migrations, kept as it is

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("clusters:detail", args=[self.name])

    @property
    def uses_scheduler(self) -> bool:
        return self.source in SCHEDULER_SOURCES

    def clean(self) -> None:
        """A scheduler source needs its controller and the nodes' known_hosts file."""
        with contextlib.suppress(sshspec.InvalidHostKey):
            if self.controller_host_key:
                self.controller_host_key = sshspec.parse_host_key(self.controller_host_key).line
        if self.source not in SCHEDULER_SOURCES:
            return
        what = "Slurm controller" if self.source == ClusterSource.SLURM else "Ray head"
        errors = {}
        if not self.controller_address:
            errors["controller_address"] = f"A {self.source} cluster needs its {what}'s address."
        if not self.controller_host_key:
            errors["controller_host_key"] = f"Pin the {what}'s host key (ssh-keyscan it once)."
        if not self.known_hosts_path:
            errors["known_hosts_path"] = (
                "The nodes' host keys come from a known_hosts file you provide on the worker."
            )
        elif not self.known_hosts_path.startswith("/"):
            errors["known_hosts_path"] = "Give the known_hosts file as an absolute path."
        for field in ("controller_key_path", "node_key_path"):
            path = getattr(self, field)
            problem = sshspec.private_key_problem(path) if path else None
            if problem:
                errors[field] = problem
        if errors:
            raise ValidationError(errors)


class NodeCheck(models.TextChoices):
    """Where a node's last connection check stands (collectors.connection)."""

    NOT_CHECKED = "", "not checked"
    CHECKING = "checking", "checking"
    OK = "ok", "connects"
    FAILED = "failed", "fails"
    UNKNOWN = "unknown", "no worker answered"


# The fields a connection depends on: a change to any of them asks for a new check.
CONNECTION_FIELDS = ("address", "port", "username", "key_path", "host_key")


class Node(models.Model):
    """One machine of a cluster, as hangdesk reaches it over SSH.

    Its rules live here, once, for every writer (the node form, the API, a cluster import):
    each field's validator, then clean() across fields.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=128)
    address = models.CharField(max_length=253, validators=[validate_remote_host])
    port = models.PositiveIntegerField(default=22, validators=[validate_port])
    username = models.CharField(max_length=64, default="root")
    # Where the worker finds the private key; the key itself never enters the database.
    # Empty means: ask the worker's ssh-agent.
    key_path = models.CharField(max_length=500, blank=True)
    host_key = models.TextField(
        validators=[validate_host_key],
        help_text="The node's public host key, as one known_hosts-style line "
        "(for example: ssh-ed25519 AAAAC3...). Connections to any other key are refused.",
    )
    # The last connection check, run by a worker when the node was added or changed, or when
    # an admin pressed "test connection" (collectors.connection.check_and_record).
    check_state = models.CharField(
        max_length=16, choices=NodeCheck.choices, default=NodeCheck.NOT_CHECKED, blank=True
    )
    check_text = models.CharField(max_length=500, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        db_table = "incidents_node"  # created by incidents' migrations, kept as it is
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

    def ssh_target(self) -> sshspec.NodeTarget:
        """Where and as whom the collector and the watch connect to this node."""
        return sshspec.NodeTarget(
            name=self.name,
            address=self.address,
            port=self.port,
            username=self.username,
            key_path=self.key_path or None,
            host_key=self.host_key,
        )

    def clean(self) -> None:
        """The host key kept as `type base64` (no host names, no comment); a key file this
        process can read must be usable unattended (no passphrase); the name free within the
        cluster."""
        with contextlib.suppress(sshspec.InvalidHostKey):  # the field's validator says why
            self.host_key = sshspec.parse_host_key(self.host_key).line
        problem = sshspec.private_key_problem(self.key_path) if self.key_path else None
        if problem:  # readable here (the web and the worker share a machine): refused now
            raise ValidationError({"key_path": ValidationError(problem, code="key")})
        if self.cluster_id is None or not self.name:
            return
        others = Node.objects.filter(cluster_id=self.cluster_id, name=self.name)
        if others.exclude(pk=self.pk).exists():
            message = f"{self.cluster.name} already has a node named {self.name}."
            raise ValidationError({"name": ValidationError(message, code="unique")})

    def validate_constraints(self, exclude=None) -> None:
        # The constraints guard the table against races; clean() and the port's validator
        # hold the same rules and say why in an SRE's words, so they are not asked twice.
        super().validate_constraints(exclude={*(exclude or ()), "name", "port"})
