import json
import time

from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster, ClusterSource
from collectors import selectors
from collectors.scheduler import JobRefused
from collectors.services import SnapshotRefused
from collectors.starts import snapshot_start
from collectors.tasks import job_kind, job_plan_here
from incidents.models import Incident
from incidents.services import incident_open


class Command(BaseCommand):
    help = (
        "Snapshot a cluster through the normal Celery path (a worker must be running). "
        "Without --incident, opens one. With --wait, waits for the diagnosis."
    )

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("--incident", type=int, help="an existing incident's id")
        parser.add_argument(
            "--slurm-job", help="a Slurm cluster's job id: its nodes are asked of the controller"
        )
        parser.add_argument(
            "--ray-job",
            help="a Ray cluster's job (submission id, Ray job id or Ray Train run name): its "
            "workers are asked of the Ray head",
        )
        parser.add_argument("--wait", action="store_true", help="wait for the diagnosis")
        parser.add_argument("--timeout", type=float, default=300, help="seconds to wait")
        parser.add_argument("--json", action="store_true", help="print the diagnosis JSON")

    def handle(self, *args, cluster: str, incident: int | None, **options):
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            raise CommandError(f"No cluster named {cluster}")
        job = self._job(target, options)
        plan = self._job_plan(target, job, incident)
        found = self._incident(target, job, incident)
        try:
            snapshot, created = snapshot_start(incident=found, source="cli", job_plan=plan)
        except (SnapshotRefused, JobRefused) as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"{'started' if created else 'following running'} snapshot {snapshot.pk} "
            f"for {found.reference}"
        )
        if not options["wait"]:
            return
        diagnosis = self._wait(snapshot, options["timeout"])
        if options["json"]:
            self.stdout.write(json.dumps(diagnosis.to_json(), indent=2, sort_keys=True))
        else:
            self.stdout.write(f"{diagnosis.classification}: {diagnosis.summary}")

    @staticmethod
    def _job_plan(target: Cluster, job: str, incident: int | None):
        """The scheduler's plan of the job, read before anything is written (a refused job
        changes nothing); None for a cluster that snapshots its own node list."""
        if not (job or target.uses_scheduler):
            return None
        if not job and incident is None:
            option = "--ray-job" if target.source == ClusterSource.RAY else "--slurm-job"
            raise CommandError(
                f"{target.name} snapshots a {job_kind(target)} job: give {option} ID"
            )
        try:
            return job_plan_here(target, job) if job else None
        except JobRefused as exc:
            raise CommandError(str(exc)) from exc

    @staticmethod
    def _incident(target: Cluster, job: str, incident: int | None) -> Incident:
        """The incident given, or a new one opened from the command line."""
        if incident is not None:
            found = Incident.objects.filter(pk=incident, cluster=target).first()
            if found is None:
                raise CommandError(f"No incident {incident} on cluster {target.name}")
            return found
        title = (
            f"{job_kind(target)} job {job} on {target.name}"
            if job
            else f"Snapshot of {target.name}"
        )
        return incident_open(
            opened_by=None,
            title=f"{title} from the command line",
            cluster=target,
            source="cli",
        )

    @staticmethod
    def _wait(snapshot, timeout: float):
        """The snapshot's diagnosis, once it is done; CommandError past the timeout."""
        deadline = time.monotonic() + timeout
        while snapshot.is_active:
            if time.monotonic() > deadline:
                counts = selectors.node_counts(snapshot)
                raise CommandError(
                    f"snapshot {snapshot.pk} still {snapshot.status} after {timeout} s "
                    f"({counts['pending']} nodes pending: is a Celery worker running?)"
                )
            time.sleep(0.5)
            snapshot.refresh_from_db()
        diagnosis = snapshot.read_diagnosis()
        if diagnosis is None:
            raise CommandError(f"snapshot {snapshot.pk} {snapshot.status}: {snapshot.error}")
        return diagnosis

    @staticmethod
    def _job(target: Cluster, options: dict) -> str:
        """The job the options name, checked against the cluster's source."""
        slurm, ray = options.get("slurm_job") or "", options.get("ray_job") or ""
        if slurm and ray:
            raise CommandError("give --slurm-job or --ray-job, not both")
        is_ray = target.source == ClusterSource.RAY
        if (ray and not is_ray) or (slurm and is_ray):
            given = "--ray-job" if ray else "--slurm-job"
            raise CommandError(
                f"{target.name} is a {target.source} cluster: {given} does not apply"
            )
        return slurm or ray
