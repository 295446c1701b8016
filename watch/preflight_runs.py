"""A preflight's run, stored: the report (watch/preflight.py) of every node's evidence,
gathered over SSH (watch/visits.py) or handed in."""

from __future__ import annotations

from django.utils import timezone

from clusters.models import Cluster

from . import preflight, visits
from .models import (
    PreflightRun,
)


def preflight_store(*, cluster: Cluster, report: dict, source: str) -> PreflightRun:
    return PreflightRun.objects.create(
        cluster=cluster, at=timezone.now(), source=source, ok=report["ok"], report=report
    )


def preflight_over_ssh(*, cluster_id: int) -> PreflightRun:
    cluster = Cluster.objects.get(pk=cluster_id)
    report = preflight.preflight_report(visits.preflight_evidence_over_ssh(cluster))
    return preflight_store(cluster=cluster, report=report, source="ssh")
