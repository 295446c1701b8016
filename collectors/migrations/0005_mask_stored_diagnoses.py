"""Diagnoses stored before masking existed are masked in place (hangdesk/masking/), with
the installation's key, so they match what the analysis stores from now on."""

from django.db import migrations

CHUNK = 50


def mask_stored_diagnoses(apps, schema_editor):
    from django.conf import settings

    from hangdesk.masking import console_key, mask_json, mask_text

    key = console_key(settings.SECRET_KEY)
    snapshot = apps.get_model("collectors", "Snapshot")
    rows = snapshot.objects.exclude(diagnosis__isnull=True, error="").only("pk", "diagnosis", "error")
    for row in rows.iterator(chunk_size=CHUNK):
        diagnosis = mask_json(row.diagnosis, key=key) if row.diagnosis is not None else None
        error = mask_text(row.error, key=key)
        if diagnosis != row.diagnosis or error != row.error:
            snapshot.objects.filter(pk=row.pk).update(diagnosis=diagnosis, error=error)


class Migration(migrations.Migration):
    dependencies = [("collectors", "0004_cluster_node_in_clusters")]

    operations = [migrations.RunPython(mask_stored_diagnoses, migrations.RunPython.noop)]
