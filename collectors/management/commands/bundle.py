from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from collectors import selectors
from collectors.bundles import BundleRefused, read_bundle
from collectors.models import Snapshot
from collectors.services import SnapshotRefused
from collectors.starts import snapshot_import_bundle
from core.models import AuditAction
from core.services import audit_record
from incidents.models import Incident


class Command(BaseCommand):
    help = "Export a snapshot as an evidence bundle, or import a bundle into an incident."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        export = sub.add_parser("export", help="SNAPSHOT_ID OUT.tar.gz")
        export.add_argument("snapshot_id", type=int)
        export.add_argument("out", type=Path)
        export.add_argument(
            "--raw", action="store_true", help="as collected, secrets included (default: masked)"
        )
        imported = sub.add_parser("import", help="INCIDENT_ID PATH (a .tar.gz or a directory)")
        imported.add_argument("incident_id", type=int)
        imported.add_argument("path", type=Path)

    def handle(self, *args, action: str, **options):
        if action == "export":
            snapshot = Snapshot.objects.filter(pk=options["snapshot_id"]).first()
            if snapshot is None:
                raise CommandError(f"No snapshot {options['snapshot_id']}")
            raw = options["raw"]
            data = selectors.snapshot_bundle(snapshot, raw=raw)
            options["out"].write_bytes(data)
            audit_record(
                user=None,
                action=AuditAction.RAW_BUNDLE_EXPORT if raw else AuditAction.BUNDLE_EXPORT,
                target=f"snapshot {snapshot.pk} to {options['out']}"[:500],
                incident_id=snapshot.incident_id,
                snapshot_id=snapshot.pk,
                via="command",
            )
            masked = "as collected" if raw else "secrets masked"
            self.stdout.write(f"wrote {options['out']} ({len(data)} bytes, {masked})")
            return
        incident = Incident.objects.filter(pk=options["incident_id"]).first()
        if incident is None:
            raise CommandError(f"No incident {options['incident_id']}")
        if not options["path"].exists():
            raise CommandError(f"{options['path']} does not exist")
        try:
            snapshot = snapshot_import_bundle(
                incident=incident, evidence=read_bundle(options["path"])
            )
        except (BundleRefused, SnapshotRefused) as exc:
            raise CommandError(f"bundle refused: {exc}") from exc
        self.stdout.write(f"imported as snapshot {snapshot.pk} of {incident.reference}")
