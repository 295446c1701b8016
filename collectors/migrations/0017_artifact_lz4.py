"""A node's artifacts compressed by PostgreSQL with lz4 instead of pglz (new rows; old rows
stay as they are and read the same): the store of a group of nodes is mostly the COPY of their
artifacts, and pglz was most of the COPY. The last 20 nodes of a 4,000-node farm snapshot
(1,060 rows, 12.2 MB): COPY 0.49-0.68 s with pglz (stored 7.3 MB), 0.15-0.20 s with lz4
(8.0 MB); no compression at all 0.13-0.16 s but 12.2 MB (the flight recorder's dumps shrink
by 43 %). Where PostgreSQL has no lz4 (built without it), and on SQLite, nothing changes."""

from django.db import migrations

_ALTER = 'ALTER TABLE "collectors_artifact" ALTER COLUMN "compressed" SET COMPRESSION {}'


def _has_lz4(schema_editor) -> bool:
    if schema_editor.connection.vendor != "postgresql":
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        found = cursor.fetchone()
    return bool(found and found[0])


def lz4(apps, schema_editor) -> None:
    if _has_lz4(schema_editor):
        schema_editor.execute(_ALTER.format("lz4"))


def pglz(apps, schema_editor) -> None:
    if _has_lz4(schema_editor):
        schema_editor.execute(_ALTER.format("pglz"))


class Migration(migrations.Migration):
    dependencies = [
        ("collectors", "0016_rank_chunks"),
    ]

    operations = [migrations.RunPython(lz4, pglz)]
