import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

import analysis
from analysis import guide
from collectors.bundles import BundleRefused, read_bundle
from collectors.models import Snapshot


class Command(BaseCommand):
    help = (
        "Print the diagnosis of a stored snapshot (SNAPSHOT_ID), or analyse an evidence "
        "bundle offline (--bundle PATH: a .tar.gz or a directory; no database needed)."
    )
    # Offline analysis needs neither the URLconf nor the templates the system checks load
    # (about half of this command's start-up); `manage.py check` still runs them.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("snapshot_id", nargs="?", type=int)
        parser.add_argument("--bundle", type=Path, help="a bundle file or directory")
        parser.add_argument("--json", action="store_true", help="print the full JSON")

    def handle(self, *args, snapshot_id: int | None, bundle: Path | None, **options):
        if (snapshot_id is None) == (bundle is None):
            raise CommandError("Give either SNAPSHOT_ID or --bundle PATH.")
        if bundle is not None:
            if not bundle.exists():
                raise CommandError(f"{bundle} does not exist")
            try:
                diagnosis = analysis.diagnose(read_bundle(bundle))
            except BundleRefused as exc:
                raise CommandError(f"bundle refused: {exc}") from exc
        else:
            snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
            if snapshot is None:
                raise CommandError(f"No snapshot {snapshot_id}")
            diagnosis = snapshot.read_diagnosis()
            if diagnosis is None:
                raise CommandError(f"Snapshot {snapshot_id} is {snapshot.status}; no diagnosis yet")
        if options["json"]:
            self.stdout.write(json.dumps(guide.reading_order(diagnosis.to_json()), indent=2))
        else:
            self.stdout.write(f"{diagnosis.classification}: {diagnosis.summary}")
