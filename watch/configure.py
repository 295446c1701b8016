"""A cluster's watch, turned on or off and its thresholds set (audited): who may change where
its page goes, which job it follows, and a fresh start when it is turned on."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from analysis.schedulers import slurm as slurm_ids
from clusters.models import Cluster, ClusterSource
from core.errors import Forbidden, Invalid
from core.roles import Role, has_role

from . import audit
from .models import (
    Watch,
    WatchState,
)
from .raises import close_open_raise


def watch_for(cluster: Cluster) -> Watch:
    watch, _ = Watch.objects.get_or_create(cluster=cluster)
    return watch


@transaction.atomic
def watch_configure(
    *,
    cluster: Cluster,
    by: AbstractBaseUser | None,
    enabled: bool,
    step_time_multiplier: float,
    floor_s: float,
    checkpoint_allowance_s: float,
    init_threshold_s: float | None = None,
    webhook_url: str | None = None,
    step_nodes: list[str] | None = None,
    slurm_job: str | None = None,
    pagerduty_routing_key: str | None = None,
    opsgenie_api_key: str | None = None,
    via: str = "page",
    ip: str | None = None,
) -> Watch:
    """Turn a cluster's watch on or off and set its thresholds. Turning it on starts learning
    afresh; turning it off closes its open raise. `webhook_url`: None keeps it; only an admin
    changes where the page goes (docs/security.md, the role matrix). Audited."""
    watch = Watch.objects.select_for_update().get(pk=watch_for(cluster).pk)
    before = {"enabled": watch.enabled, "webhook_url": watch.webhook_url}
    if webhook_url is not None and webhook_url != watch.webhook_url:
        if not has_role(by, Role.ADMIN):
            raise Forbidden("Only an admin sets the webhook URL (where the watch's page goes).")
        watch.webhook_url = webhook_url
    _set_pager_keys(watch, by, pagerduty_routing_key, opsgenie_api_key)
    names = set(cluster.nodes.values_list("name", flat=True))
    unknown = sorted(set(step_nodes or ()) - names)
    if unknown:
        raise Invalid(f"no node named {', '.join(unknown)} in {cluster.name}", field="step_nodes")
    was = watch.enabled
    watch.step_time_multiplier = step_time_multiplier
    watch.floor_s = floor_s
    watch.checkpoint_allowance_s = checkpoint_allowance_s
    if init_threshold_s is not None:  # None keeps it
        watch.init_threshold_s = init_threshold_s
    watch.step_nodes = sorted(step_nodes or ())
    if slurm_job is not None:
        watch.slurm_job = _watched_job(cluster, slurm_job)
    watch.enabled = enabled
    if enabled and not was:
        _reset_progress(watch)
        watch.enabled_at = timezone.now()
        watch.state = WatchState.WAITING
    if not enabled:
        watch.state = WatchState.OFF
        watch.claim, watch.claimed_until = "", None
        close_open_raise(watch, why="the watch was turned off", by=by)
    watch.full_clean()
    watch.save()
    audit.watch_changed(watch=watch, by=by, before=before, via=via, ip=ip)
    return watch


def _set_pager_keys(watch: Watch, by, pagerduty: str | None, opsgenie: str | None) -> None:
    """None keeps a key; only an admin sets where the watch pages (as for the webhook)."""
    given = {"pagerduty_routing_key": pagerduty, "opsgenie_api_key": opsgenie}
    for name, value in given.items():
        if value is None or value == getattr(watch, name):
            continue
        if not has_role(by, Role.ADMIN):
            raise Forbidden("Only an admin sets the pager keys (where the watch's page goes).")
        setattr(watch, name, value.strip())


def _watched_job(cluster: Cluster, job: str) -> str:
    job = job.strip()
    if job and cluster.source != ClusterSource.SLURM:
        raise Invalid(
            f"{cluster.name} is not a Slurm cluster: it has no Slurm job", field="slurm_job"
        )
    if job and not slurm_ids.JOB_ID.match(job):
        raise Invalid(f"{job[:40]!r} is not a Slurm job id", field="slurm_job")
    return job


def _reset_progress(watch: Watch) -> None:
    watch.last_step = watch.last_step_at = watch.step_time_s = None
    watch.recent_step_time_s = watch.threshold_s = watch.checkpoint_since = None
    watch.step_times, watch.nodes, watch.state_reason = [], {}, ""
    watch.job_no_step_since = None
