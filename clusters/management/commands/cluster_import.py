from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from clusters.importing import ImportRefused, cluster_import, load_cluster_file


class Command(BaseCommand):
    help = "Create or update a cluster and its nodes from a JSON/YAML file (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file: Path, **options):
        try:
            result = cluster_import(load_cluster_file(file))
        except ImportRefused as exc:
            raise CommandError(str(exc)) from exc
        verb = "created" if result.created else "updated"
        self.stdout.write(
            f"cluster {result.cluster.name} {verb}: "
            f"{len(result.nodes_created)} nodes added, {len(result.nodes_updated)} updated, "
            f"{len(result.nodes_unchanged)} unchanged"
        )
