"""Opening an incident, from the form or the API: on a Slurm cluster it starts from the job.

The job is read on a worker before anything is written (`collectors.tasks.job_plan_on_worker`),
so a job that cannot be snapshot (unknown, pending, ended, an unreachable controller, a node
without a known host key) opens nothing; otherwise the incident, the job's nodes and the
snapshot of exactly those nodes are written in one transaction.
"""

from __future__ import annotations

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from clusters.models import ClusterSource
from collectors import tasks as snapshot_tasks
from core.errors import Invalid
from core.roles import Role, role_required
from incidents import services as incident_services
from incidents.forms import IncidentOpenForm


def job_plan_for_opening(cluster, job: str) -> dict | None:
    """The worker's read of the job for a Slurm cluster (None for a cluster of listed
    nodes); Invalid, naming the field, when the job cannot be used."""
    if not cluster.uses_scheduler:
        if job:
            raise Invalid(
                f"Cluster {cluster.name} lists its own nodes; it takes no Slurm job.",
                field="slurm_job",
            )
        return None
    if cluster.source != ClusterSource.SLURM:
        raise Invalid(f"Cluster {cluster.name} is a {cluster.source} cluster.", field="cluster")
    if not job:
        raise Invalid(
            f"Cluster {cluster.name} snapshots a Slurm job: give its id.", field="slurm_job"
        )
    return snapshot_tasks.job_plan_on_worker(cluster, job)


@role_required(Role.RESPONDER)
def incident_open(request: HttpRequest) -> HttpResponse:
    form = IncidentOpenForm(request.POST or None, initial={"commander": request.user})
    if request.method == "POST" and form.is_valid():
        fields = dict(form.cleaned_data)
        job = fields.pop("slurm_job", "").strip()
        try:
            plan = job_plan_for_opening(fields["cluster"], job)
        except Invalid as exc:
            form.add_error("slurm_job" if exc.field == "slurm_job" else "cluster", str(exc))
        else:
            with transaction.atomic():
                incident = incident_services.incident_open(opened_by=request.user, **fields)
                if plan is not None:
                    snapshot_tasks.snapshot_start(incident=incident, by=request.user, job_plan=plan)
            started = " Snapshot of its Slurm job started." if plan is not None else ""
            messages.success(request, f"{incident.reference} opened.{started}")
            return redirect(incident)
    return render(request, "incidents/open.html", {"form": form})
