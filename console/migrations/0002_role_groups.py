from django.db import migrations

ROLE_GROUPS = ("viewer", "responder", "admin")


def create_role_groups(apps, schema_editor):
    group_model = apps.get_model("auth", "Group")
    for name in ROLE_GROUPS:
        group_model.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("console", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
