"""`manage.py preflight CLUSTER [--json] [--from-snapshot]`: do every rank's NCCL_/TORCH_/CUDA_
environment, the nodes' shell start-up files and NCCL's reported configuration agree?

Exit status: 0 they agree, 1 they differ (or a node could not be read, or ranks of the expected
world size have no training process), 2 the cluster cannot be checked. A launch script can
refuse to start on a non-zero status. The result is also stored and shown on the cluster page.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from analysis.stacks import compact_ranks
from clusters.models import Cluster
from collectors import selectors as snapshot_selectors
from collectors.models import Snapshot, SnapshotStatus
from core.errors import AppError

from ... import preflight, preflight_runs, visits


class Command(BaseCommand):
    help = "Compare every rank's NCCL_/TORCH_/CUDA_ environment, start-up files and NCCL config."

    def add_arguments(self, parser):
        parser.add_argument("cluster")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")
        parser.add_argument(
            "--from-snapshot",
            action="store_true",
            help="compare the cluster's latest finished snapshot instead of visiting the nodes",
        )
        parser.add_argument("--no-store", action="store_true", help="do not keep the result")

    def handle(self, *args, cluster: str, **options):
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            raise CommandError(f"No cluster named {cluster}", returncode=2)
        try:
            evidence, source = self._evidence(target, options["from_snapshot"])
        except AppError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        report = preflight.preflight_report(evidence)
        if not options["no_store"]:
            preflight_runs.preflight_store(cluster=target, report=report, source=source)
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2, sort_keys=True))
        else:
            self._print(report)
        if not report["ok"]:
            sys.exit(1)

    def _evidence(self, cluster: Cluster, from_snapshot: bool):
        if not from_snapshot:
            return visits.preflight_evidence_over_ssh(cluster), "ssh"
        snapshot = (
            Snapshot.objects.filter(cluster=cluster, status=SnapshotStatus.DONE)
            .exclude(source="bundle")
            .order_by("-started_at", "-pk")
            .first()
        )
        if snapshot is None:
            raise CommandError(f"{cluster.name} has no finished snapshot", returncode=2)
        return snapshot_selectors.snapshot_evidence(snapshot), f"snapshot {snapshot.pk}"

    def _print(self, report: dict) -> None:
        self.stdout.write(("OK: " if report["ok"] else "DIFFERENT: ") + report["summary"])
        for diff in report["env_diffs"]:
            values = "; ".join(f"{v['value']} on ranks {v['ranks']}" for v in diff["values"])
            self.stdout.write(f"  {diff['name']}: {values}")
        for item in report["shell_init"]:
            self.stdout.write(f"  {item['node']}: {item['path']}: {item['line']}")
        for diff in report["nccl_diffs"]:
            values = "; ".join(f"{v['value']} on {', '.join(v['nodes'])}" for v in diff["values"])
            self.stdout.write(f"  NCCL {diff['name']}: {values}")
        for node in report["unreachable"]:
            self.stdout.write(f"  {node}: could not be read")
        if report.get("missing_ranks"):
            missing = compact_ranks(report["missing_ranks"])
            self.stdout.write(
                f"  missing ranks (no training process): {missing}"
                f" of world size {report['expected_world_size']}"
            )
