"""ApiToken and WorkerHeartbeat now belong to core (core/migrations/0001): state only, the
tables stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("console", "0003_apitoken"), ("core", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ApiToken"),
                migrations.DeleteModel(name="WorkerHeartbeat"),
            ],
            database_operations=[],
        )
    ]
