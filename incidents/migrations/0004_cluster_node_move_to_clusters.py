"""Cluster and Node now belong to clusters (clusters/migrations/0001): state only, the tables
stay as they are. Incident.cluster points at clusters.Cluster, the same table."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("incidents", "0003_postmortem"), ("clusters", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="incident",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="incidents",
                        to="clusters.cluster",
                    ),
                ),
                migrations.DeleteModel(name="Node"),
                migrations.DeleteModel(name="Cluster"),
            ],
            database_operations=[],
        )
    ]
