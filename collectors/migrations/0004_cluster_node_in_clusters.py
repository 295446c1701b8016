"""Snapshot.cluster and NodeCollection.node point at clusters.Cluster / clusters.Node, the
same tables as before (clusters/migrations/0001): state only. It runs before incidents takes
the two models out of its state (incidents/migrations/0004)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("collectors", "0003_delete_rankrecord"), ("clusters", "0001_initial")]
    run_before = [("incidents", "0004_cluster_node_move_to_clusters")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="snapshot",
                    name="cluster",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="snapshots",
                        to="clusters.cluster",
                    ),
                ),
                migrations.AlterField(
                    model_name="nodecollection",
                    name="node",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        to="clusters.node",
                    ),
                ),
            ],
            database_operations=[],
        )
    ]
