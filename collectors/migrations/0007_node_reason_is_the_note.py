"""A node's `reason` holds the note of its evidence status (analysis.evidence.EvidenceStatus):
for a node that is OK, "" when its evidence is whole and why it stopped short otherwise. Rows
written before stored the whole status text ("ok", "partial: <why>"); they are rewritten."""

from django.db import migrations

CHUNK = 500


def reason_to_note(apps, schema_editor):
    from analysis.evidence import EvidenceStatus

    collection = apps.get_model("collectors", "NodeCollection")
    ok = collection.objects.filter(status="ok")
    ok.filter(reason="ok").update(reason="")
    partial = ok.filter(reason__startswith="partial:").only("pk", "reason")
    for row in partial.iterator(chunk_size=CHUNK):
        note = EvidenceStatus.from_text(row.reason).note
        collection.objects.filter(pk=row.pk).update(reason=note)


def note_to_reason(apps, schema_editor):
    collection = apps.get_model("collectors", "NodeCollection")
    ok = collection.objects.filter(status="ok")
    ok.filter(reason="").update(reason="ok")
    for row in ok.exclude(reason="ok").only("pk", "reason").iterator(chunk_size=CHUNK):
        collection.objects.filter(pk=row.pk).update(reason=f"partial: {row.reason}")


class Migration(migrations.Migration):
    dependencies = [("collectors", "0006_scheduler_job")]

    operations = [migrations.RunPython(reason_to_note, note_to_reason)]
