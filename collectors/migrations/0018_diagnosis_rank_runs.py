"""The diagnosis head's long rank lists stored as runs (collectors/headruns.py): the column
stays the jsonb (SQLite: JSON text) it was, so this changes only Django's state (on SQLite
an AlterField would copy the table), and heads stored before read back as they were.
Migrated back, the heads stored as runs are written out as lists again, as the code before
this one reads them."""

from django.db import migrations

import collectors.models
from collectors import headruns


def lists_again(apps, schema_editor) -> None:
    Snapshot = apps.get_model("collectors", "Snapshot")  # the field as it was: no runs read
    stored = Snapshot.objects.filter(diagnosis__has_key=headruns.RUNS)
    for pk in stored.values_list("pk", flat=True).iterator():
        head = Snapshot.objects.filter(pk=pk).values_list("diagnosis", flat=True).get()
        Snapshot.objects.filter(pk=pk).update(diagnosis=headruns.read(head))


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0017_artifact_lz4"),
    ]

    operations = [
        # First, so that migrated back it runs last, with the field as it was before.
        migrations.RunPython(migrations.RunPython.noop, lists_again),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="snapshot",
                    name="diagnosis",
                    field=collectors.models.DiagnosisField(blank=True, null=True),
                ),
            ],
        ),
    ]
