"""ApiToken and WorkerHeartbeat move here from console, the project package: state only.

Their tables keep the names console's migrations gave them (`Meta.db_table`), so no row moves
and no table is touched; console/migrations/0004 takes them out of console's state. The
content types follow the models, so permissions granted on them still apply.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ("apitoken", "workerheartbeat")


def content_types_to_core(apps, schema_editor):
    _relabel(apps, "console", "core")


def content_types_to_console(apps, schema_editor):
    _relabel(apps, "core", "console")


def _relabel(apps, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("console", "0003_apitoken"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="WorkerHeartbeat",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("hostname", models.CharField(max_length=255, unique=True)),
                        ("seen_at", models.DateTimeField()),
                    ],
                    options={"db_table": "console_workerheartbeat"},
                ),
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "name",
                            models.CharField(
                                help_text="what uses it, e.g. 'job watchdog'", max_length=100
                            ),
                        ),
                        ("key_hash", models.CharField(max_length=64, unique=True)),
                        ("prefix", models.CharField(max_length=12)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"ordering": ["-created_at"], "db_table": "console_apitoken"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_to_core, content_types_to_console),
    ]
