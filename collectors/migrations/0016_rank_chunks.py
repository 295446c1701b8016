"""The per-rank table moved out of the stored diagnosis into chunks (collectors/rankstore.py),
its distinct values beside the head; back into the diagnosis on the way down."""

import django.db.models.deletion
from django.db import migrations, models

from collectors import rankstore


def tables_apart(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # The chunks are zlib already: TOAST stores them out of line without compressing.
        schema_editor.execute(
            "ALTER TABLE collectors_rankchunk ALTER COLUMN rows SET STORAGE EXTERNAL"
        )
    Snapshot = apps.get_model("collectors", "Snapshot")
    RankChunk = apps.get_model("collectors", "RankChunk")
    with_table = Snapshot.objects.filter(diagnosis__has_key="per_rank")
    for pk in with_table.values_list("pk", flat=True).iterator():
        diagnosis = Snapshot.objects.filter(pk=pk).values_list("diagnosis", flat=True).get()
        head, rows = rankstore.split(diagnosis)
        RankChunk.objects.bulk_create(
            RankChunk(snapshot_id=pk, **vars(chunk)) for chunk in rankstore.chunks(rows or [])
        )
        Snapshot.objects.filter(pk=pk).update(
            diagnosis=head, rank_values=rankstore.field_values(rows or [])
        )


def tables_back(apps, schema_editor):
    Snapshot = apps.get_model("collectors", "Snapshot")
    RankChunk = apps.get_model("collectors", "RankChunk")
    with_head = Snapshot.objects.filter(diagnosis__isnull=False)
    for pk in with_head.values_list("pk", flat=True).iterator():
        diagnosis = Snapshot.objects.filter(pk=pk).values_list("diagnosis", flat=True).get()
        if not isinstance(diagnosis, dict) or "per_rank" in diagnosis:
            continue
        rows = []
        chunks = RankChunk.objects.filter(snapshot_id=pk).order_by("first")
        for stored in chunks.values_list("rows", flat=True):
            rows.extend(rankstore.rows_of(stored))
        Snapshot.objects.filter(pk=pk).update(diagnosis={**diagnosis, "per_rank": rows})


class Migration(migrations.Migration):

    dependencies = [
        ('collectors', '0015_snapshot_read_ahead_lease'),
    ]

    operations = [
        migrations.AddField(
            model_name='snapshot',
            name='rank_values',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='RankChunk',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first', models.PositiveIntegerField(help_text='the position of its first row in the table')),
                ('count', models.PositiveIntegerField()),
                ('rank_lo', models.IntegerField(null=True)),
                ('rank_hi', models.IntegerField(null=True)),
                ('rows', models.BinaryField(help_text="zlib of the rows' JSON array")),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rank_chunks', to='collectors.snapshot')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('snapshot', 'first'), name='one_rank_chunk_per_first')],
            },
        ),
        migrations.RunPython(tables_apart, tables_back),
    ]
