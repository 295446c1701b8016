"""The diagnosis' class as a column the database keeps beside it (generated, stored): the
incident list showed each incident's latest verdict by reading `diagnosis -> 'classification'`,
which decompresses the whole diagnosis (12 MB of JSON at 32,000 ranks) for every incident
listed. Computed by the database on every write of the diagnosis; nothing writes it."""

import django.db.models.fields.json
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0011_diagnosis_lz4"),
    ]

    operations = [
        migrations.AddField(
            model_name="snapshot",
            name="classification",
            field=models.GeneratedField(
                db_persist=True,
                expression=django.db.models.fields.json.KeyTextTransform(
                    "classification", "diagnosis"
                ),
                output_field=models.CharField(max_length=32, null=True),
            ),
        ),
    ]
