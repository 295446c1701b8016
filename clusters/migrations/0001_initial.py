"""Cluster and Node move here from incidents: state only.

Their tables keep the names incidents' migrations gave them (`Meta.db_table`), so no row moves
and no table is touched; incidents/migrations/0004 and collectors/migrations/0003 point their
foreign keys here and take the models out of incidents' state. The content types follow the
models, so permissions granted on them and the admin's history still apply.
"""

import django.db.models.deletion
from django.db import migrations, models

import clusters.validators

MOVED = ("cluster", "node")


def content_types_to_clusters(apps, schema_editor):
    _relabel(apps, "incidents", "clusters")


def content_types_to_incidents(apps, schema_editor):
    _relabel(apps, "clusters", "incidents")


def _relabel(apps, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not content_type.objects.filter(app_label=new, model=model).exists():
            content_type.objects.filter(app_label=old, model=model).update(app_label=new)


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("incidents", "0003_postmortem"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Cluster",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.SlugField(max_length=64, unique=True)),
                        ("description", models.TextField(blank=True)),
                        ("process_pattern", models.CharField(default="torchrun|torch[.]distributed[.](run|launch)|pretrain_[A-Za-z0-9_]*[.]py|megatron|[A-Za-z0-9_]*train[A-Za-z0-9_]*[.]py", help_text="POSIX extended regular expression matched against process command lines.", max_length=500, validators=[clusters.validators.validate_process_pattern])),
                        ("expected_world_size", models.PositiveIntegerField(blank=True, help_text="Total ranks of the job, when known.", null=True)),
                        ("log_globs", models.JSONField(blank=True, default=list, help_text="Absolute path globs of training and NCCL logs on the nodes.", validators=[clusters.validators.validate_globs])),
                        ("flight_recorder_globs", models.JSONField(blank=True, default=list, help_text="Absolute path globs of PyTorch flight-recorder dumps.", validators=[clusters.validators.validate_globs])),
                        ("pyspy_command", models.CharField(default="py-spy", help_text="py-spy as invoked on the nodes.", max_length=500)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={"db_table": "incidents_cluster", "ordering": ["name"]},
                ),
                migrations.CreateModel(
                    name="Node",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("name", models.CharField(max_length=128)),
                        ("address", models.CharField(max_length=253, validators=[clusters.validators.validate_remote_host])),
                        ("port", models.PositiveIntegerField(default=22, validators=[clusters.validators.validate_port])),
                        ("username", models.CharField(default="root", max_length=64)),
                        ("key_path", models.CharField(blank=True, max_length=500)),
                        ("host_key", models.TextField(help_text="The node's public host key, as one known_hosts-style line (for example: ssh-ed25519 AAAAC3...). Connections to any other key are refused.", validators=[clusters.validators.validate_host_key])),
                        ("cluster", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="nodes", to="clusters.cluster")),
                    ],
                    options={
                        "db_table": "incidents_node",
                        "ordering": ["cluster", "name"],
                        "constraints": [
                            models.UniqueConstraint(fields=("cluster", "name"), name="unique_node_name_per_cluster"),
                            models.CheckConstraint(condition=models.Q(("port__gte", 1), ("port__lte", 65535)), name="node_port_in_range"),
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_to_clusters, content_types_to_incidents),
    ]
