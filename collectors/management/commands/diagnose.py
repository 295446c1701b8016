import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from collectors.models import Snapshot
from collectors.selectors import snapshot_reanalysed
from hangdesk.cli import diagnose_command
from readings import guide


class Command(BaseCommand):
    help = (
        "Print the diagnosis of a stored snapshot (SNAPSHOT_ID), or analyse an evidence "
        "bundle offline (--bundle PATH: a .tar.gz or a directory; no database needed, as "
        "`hangdesk diagnose PATH` does; exit status 1 when the job is stuck)."
    )
    # Offline analysis needs neither the URLconf nor the templates the system checks load
    # (about half of this command's start-up); `manage.py check` still runs them.
    requires_system_checks = []
    exit_status = 0  # of --bundle, as `hangdesk diagnose` gives it (run from the command line)

    def run_from_argv(self, argv):
        super().run_from_argv(argv)
        if self.exit_status:
            sys.exit(self.exit_status)

    def add_arguments(self, parser):
        parser.add_argument("snapshot_id", nargs="?", type=int)
        parser.add_argument("--bundle", type=Path, help="a bundle file or directory")
        parser.add_argument("--json", action="store_true", help="print the full JSON")
        parser.add_argument("--markdown", action="store_true", help="print a Markdown report")
        parser.add_argument(
            "--reanalyse",
            action="store_true",
            help="analyse SNAPSHOT_ID's stored evidence again with this version's engine "
            "(printed, not stored: the stored verdict is the one the responders saw)",
        )

    def handle(self, *args, snapshot_id: int | None, bundle: Path | None, **options):
        if (snapshot_id is None) == (bundle is None):
            raise CommandError("Give either SNAPSHOT_ID or --bundle PATH.")
        if bundle is not None:
            output = "json" if options["json"] else "markdown" if options["markdown"] else "text"
            self.exit_status = diagnose_command(
                bundle, output=output, stdout=self.stdout, prog="manage.py diagnose"
            )
            return
        snapshot = Snapshot.objects.filter(pk=snapshot_id).first()
        if snapshot is None:
            raise CommandError(f"No snapshot {snapshot_id}")
        if options["reanalyse"]:
            if snapshot.is_active:
                raise CommandError(f"Snapshot {snapshot_id} is {snapshot.status}: still collecting")
            diagnosis = snapshot_reanalysed(snapshot)
        else:
            diagnosis = snapshot.read_diagnosis()
        if diagnosis is None:
            raise CommandError(f"Snapshot {snapshot_id} is {snapshot.status}; no diagnosis yet")
        if options["json"]:
            self.stdout.write(json.dumps(guide.reading_order(diagnosis), indent=2))
        else:
            self.stdout.write(f"{diagnosis.classification}: {diagnosis.summary}")
