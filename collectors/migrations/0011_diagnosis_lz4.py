"""The stored diagnosis compressed with LZ4 instead of PostgreSQL's default pglz: a 32,000-rank
diagnosis is 12 MB of JSON, and pglz took ~0.25 s of the server's time to store it (LZ4 ~0.05
s, 0.66 MB against 0.59 MB) and again to read it back for every page that slices its per-rank
table. Values stored before keep their compression until rewritten; a server built without
LZ4 keeps pglz (nothing else changes)."""

from django.db import migrations

COLUMNS = (("collectors_snapshot", "diagnosis"), ("collectors_snapshot", "provisional"))


def _set(compression: str):
    def run(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql" or connection.pg_version < 140000:
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' "
                           "AND %s = ANY(enumvals)", [compression])  # fmt: skip
            if cursor.fetchone() is None:
                return  # not built with it
            for table, column in COLUMNS:
                cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION "
                               f"{compression}")  # fmt: skip

    return run


class Migration(migrations.Migration):
    dependencies = [("collectors", "0010_node_parse_and_provisional")]

    operations = [migrations.RunPython(_set("lz4"), _set("pglz"))]
