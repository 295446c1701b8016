"""Opening an incident, from the form or the API: on a Slurm or Ray cluster it starts from
the job.

The job is read on a worker before anything is written (`collectors.tasks.job_plan_on_worker`),
so a job that cannot be snapshot (unknown, pending, ended, an unreachable controller or head,
a node without a known host key) opens nothing; otherwise the incident, the job's nodes and
the snapshot of exactly those nodes (on a Ray cluster: exactly its workers' processes) are
written in one transaction.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from clusters.models import ClusterSource
from collectors import starts
from collectors import tasks as snapshot_tasks
from core.errors import Invalid
from core.roles import Role, role_required
from incidents import services as incident_services
from incidents.forms import IncidentOpenForm

# The input that names a job, by the cluster's source.
JOB_FIELDS = {ClusterSource.SLURM: ("slurm_job", "Slurm"), ClusterSource.RAY: ("ray_job", "Ray")}


def job_plan_for_opening(cluster, slurm_job: str = "", ray_job: str = "") -> dict | None:
    """The worker's read of the job for a Slurm or Ray cluster (None for a cluster of listed
    nodes); Invalid, naming the field, when the job cannot be used."""
    given = {"slurm_job": slurm_job.strip(), "ray_job": ray_job.strip()}
    wanted = JOB_FIELDS.get(cluster.source)
    for field, value in given.items():
        if value and (wanted is None or field != wanted[0]):
            kind = "Slurm" if field == "slurm_job" else "Ray"
            what = f"is a {wanted[1]} cluster" if wanted else "lists its own nodes"
            raise Invalid(f"Cluster {cluster.name} {what}; it takes no {kind} job.", field=field)
    if wanted is None:
        return None
    field, kind = wanted
    if not given[field]:
        raise Invalid(f"Cluster {cluster.name} snapshots a {kind} job: give its id.", field=field)
    return snapshot_tasks.job_plan_on_worker(cluster, given[field])


@role_required(Role.RESPONDER)
def incident_open(request: HttpRequest) -> HttpResponse:
    form = IncidentOpenForm(request.POST or None, initial={"commander": request.user})
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        jobs = {"slurm_job": fields.pop("slurm_job", ""), "ray_job": fields.pop("ray_job", "")}
        try:
            plan = job_plan_for_opening(fields["cluster"], **jobs)
        except Invalid as exc:
            form.add_error(exc.field if exc.field in jobs else "cluster", str(exc))
        else:
            with transaction.atomic():
                incident = incident_services.incident_open(opened_by=request.user, **fields)
                if plan is not None:
                    starts.snapshot_start(incident=incident, by=request.user, job_plan=plan)
            kind = snapshot_tasks.job_kind(fields["cluster"])
            started = f" Snapshot of its {kind} job started." if plan is not None else ""
            messages.success(request, f"{incident.reference} opened.{started}")
            return redirect(incident)
    return render(request, "incidents/open.html", {"form": form})
