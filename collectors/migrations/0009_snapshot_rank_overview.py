"""The per-rank table's overview beside each diagnosis (analysis/rankview.py), made for the
diagnoses stored before it existed, so every page reads them the light way."""

from django.db import migrations, models

CHUNK = 10  # a diagnosis of 32,000 ranks is 12 MB of JSON


def overview_stored_diagnoses(apps, schema_editor):
    from analysis.diagnosis import Diagnosis
    from analysis.rankview import overview

    snapshot = apps.get_model("collectors", "Snapshot")
    rows = snapshot.objects.filter(diagnosis__isnull=False).only("pk", "diagnosis")
    for row in rows.iterator(chunk_size=CHUNK):
        if isinstance(row.diagnosis, dict):
            made = overview(Diagnosis.from_json(row.diagnosis)).to_json()
            snapshot.objects.filter(pk=row.pk).update(rank_overview=made)


class Migration(migrations.Migration):
    dependencies = [("collectors", "0008_push_uploads")]

    operations = [
        migrations.AddField(
            model_name="snapshot",
            name="rank_overview",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(overview_stored_diagnoses, migrations.RunPython.noop),
    ]
