"""The stored diagnosis is compressed with LZ4 where the server has it (migration 0011): 12 MB
of JSON at 32,000 ranks, stored once and sliced by every page."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def test_the_diagnosis_column_is_stored_with_lz4_when_the_server_has_it():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        (has_lz4,) = cursor.fetchone()
        cursor.execute(
            "SELECT attname, attcompression FROM pg_attribute WHERE attrelid = "
            "'collectors_snapshot'::regclass AND attname IN ('diagnosis', 'provisional')"
        )
        compression = dict(cursor.fetchall())
    assert compression == ({"diagnosis": "l", "provisional": "l"} if has_lz4 else
                           {"diagnosis": "", "provisional": ""})  # fmt: skip
