"""The diagnosis head's long rank lists stored as runs (collectors/headruns.py): the column
stays the jsonb (SQLite: JSON text) it was, so this changes only Django's state (on SQLite
an AlterField would copy the table). Heads stored before read back as they were."""

from django.db import migrations

import collectors.models


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0017_artifact_lz4"),
    ]

    operations = [
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
