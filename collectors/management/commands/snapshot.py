import json
import time

from django.core.management.base import BaseCommand, CommandError

from clusters.models import Cluster, ClusterSource
from collectors import selectors
from collectors.scheduler import JobRefused
from collectors.services import SnapshotRefused
from collectors.tasks import job_kind, job_plan_here, snapshot_start
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
        plan = None
        if job or target.uses_scheduler:
            kind = job_kind(target)
            if not job and incident is None:
                option = "--ray-job" if target.source == ClusterSource.RAY else "--slurm-job"
                raise CommandError(f"{cluster} snapshots a {kind} job: give {option} ID")
            try:  # read before anything is written: a refused job changes nothing
                plan = job_plan_here(target, job) if job else None
            except JobRefused as exc:
                raise CommandError(str(exc)) from exc
        if incident is not None:
            found = Incident.objects.filter(pk=incident, cluster=target).first()
            if found is None:
                raise CommandError(f"No incident {incident} on cluster {cluster}")
        else:
            title = (
                f"{job_kind(target)} job {job} on {cluster}" if job else f"Snapshot of {cluster}"
            )
            found = incident_open(
                opened_by=None,
                title=f"{title} from the command line",
                cluster=target,
                source="cli",
            )
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
        deadline = time.monotonic() + options["timeout"]
        while snapshot.is_active:
            if time.monotonic() > deadline:
                counts = selectors.node_counts(snapshot)
                raise CommandError(
                    f"snapshot {snapshot.pk} still {snapshot.status} after {options['timeout']} s "
                    f"({counts['pending']} nodes pending: is a Celery worker running?)"
                )
            time.sleep(0.5)
            snapshot.refresh_from_db()
        diagnosis = snapshot.read_diagnosis()
        if diagnosis is None:
            raise CommandError(f"snapshot {snapshot.pk} {snapshot.status}: {snapshot.error}")
        if options["json"]:
            self.stdout.write(json.dumps(diagnosis.to_json(), indent=2, sort_keys=True))
        else:
            self.stdout.write(f"{diagnosis.classification}: {diagnosis.summary}")

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
