"""The per-rank table stored apart from the diagnosis head (collectors/rankstore.py): written
with the head by the one UPDATE, read back a page, a rank or whole; migration 0016 moves the
tables of diagnoses stored before into chunks and back."""

from __future__ import annotations

import importlib
import json
import math

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.diagnosis import Diagnosis
from collectors import rankstore
from collectors.models import SNAPSHOT_FLOW, RankChunk, Snapshot, SnapshotStatus
from collectors.services import rank_overview
from incidents.services import incident_open
from tests.pages.fleet import fleet_diagnosis

pytestmark = pytest.mark.django_db
migration = importlib.import_module("collectors.migrations.0016_rank_chunks")

WORLD = 2 * rankstore.CHUNK_ROWS + 345


@pytest.fixture
def stored(bob, cluster):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    diagnosis = fleet_diagnosis(WORLD, suspect=1207, missing=1733)
    for row in diagnosis["per_rank"]:
        row["last_step_at"] = f"2026-12-03T10:{row['rank'] % 3:02d}:00+00:00"
    snapshot = Snapshot.objects.create(
        incident=incident, cluster=cluster, status=SnapshotStatus.ANALYSING
    )
    return snapshot, diagnosis


def _head_in_the_database(pk: int):
    return Snapshot.objects.filter(pk=pk).values_list("diagnosis", flat=True).get()


def test_the_verdicts_update_stores_the_head_and_the_table_apart(stored):
    snapshot, diagnosis = stored
    moved = SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk), SnapshotStatus.DONE,
        diagnosis=diagnosis, rank_overview=rank_overview(diagnosis),
    )  # fmt: skip
    assert moved == 1
    head = _head_in_the_database(snapshot.pk)
    assert "per_rank" not in head and head == {
        k: v for k, v in diagnosis.items() if k != "per_rank"
    }
    chunks = RankChunk.objects.filter(snapshot=snapshot).order_by("first")
    assert [(c.first, c.count, c.rank_lo, c.rank_hi) for c in chunks] == [
        (0, 1000, 0, 999), (1000, 1000, 1000, 1999), (2000, 345, 2000, WORLD - 1)
    ]  # fmt: skip
    read = Snapshot.objects.get(pk=snapshot.pk)
    assert read.classification == diagnosis["classification"]  # generated from the head
    assert read.whole_diagnosis() == diagnosis
    assert read.read_diagnosis() == Diagnosis.from_json(diagnosis)
    rows = diagnosis["per_rank"]
    for start, stop in ((0, 200), (995, 1005), (1999, 2001), (2300, 2345), (2340, 9000), (7, 7)):
        assert read.rank_rows(start, stop) == rows[start:stop], (start, stop)
    assert read.rank_rows(WORLD + 10, WORLD + 20) == []
    assert read.rank_row_json(1500) == rows[1500]
    assert read.rank_row_json(WORLD) is None
    assert sorted(read.rank_field_values("last_step_at")) == [
        "2026-12-03T10:00:00+00:00", "2026-12-03T10:01:00+00:00", "2026-12-03T10:02:00+00:00"
    ]  # fmt: skip
    assert read.rank_field_values("node")[:2] == ["node-0000", "node-0001"]  # from the chunks


def test_a_second_verdict_replaces_the_table_and_no_verdict_removes_it(stored):
    snapshot, diagnosis = stored
    rows = Snapshot.objects.filter(pk=snapshot.pk)
    rows.update(diagnosis=diagnosis)
    smaller = {**diagnosis, "per_rank": diagnosis["per_rank"][:10]}
    rows.update(diagnosis=smaller)
    assert RankChunk.objects.filter(snapshot=snapshot).count() == 1
    assert Snapshot.objects.get(pk=snapshot.pk).whole_diagnosis() == smaller
    rows.update(diagnosis=None)
    assert not RankChunk.objects.filter(snapshot=snapshot).exists()
    assert Snapshot.objects.get(pk=snapshot.pk).read_diagnosis() is None


def test_an_update_that_moves_no_row_writes_no_table(stored):
    snapshot, diagnosis = stored
    Snapshot.objects.filter(pk=snapshot.pk).update(status=SnapshotStatus.FAILED)
    moved = SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk), SnapshotStatus.DONE, diagnosis=diagnosis
    )
    assert moved == 0 and not RankChunk.objects.filter(snapshot=snapshot).exists()
    assert _head_in_the_database(snapshot.pk) is None


def test_a_snapshot_saved_with_a_table_stores_it_apart(bob, cluster):
    incident = incident_open(opened_by=bob, title="imported", cluster=cluster)
    diagnosis = fleet_diagnosis(1200, suspect=3, missing=4)
    with CaptureQueriesContext(connection) as queries:
        snapshot = Snapshot.objects.create(
            incident=incident, cluster=cluster, status=SnapshotStatus.DONE, diagnosis=diagnosis
        )
    assert snapshot.diagnosis is diagnosis  # the instance keeps what it was given
    assert "per_rank" not in _head_in_the_database(snapshot.pk)
    assert RankChunk.objects.filter(snapshot=snapshot).count() == 2
    read = Snapshot.objects.get(pk=snapshot.pk)
    assert read.whole_diagnosis() == diagnosis
    assert read.rank_values == rankstore.field_values(diagnosis["per_rank"])
    # The head written once: its INSERT, no UPDATE after it.
    writes = [q["sql"] for q in queries if "collectors_snapshot" in q["sql"].split("(")[0]]
    assert len(writes) == 1 and writes[0].startswith("INSERT"), writes

    diagnosis["summary"] = "saved again"
    read.diagnosis = diagnosis
    read.save(update_fields=["diagnosis"])
    assert _head_in_the_database(snapshot.pk)["summary"] == "saved again"
    assert Snapshot.objects.get(pk=snapshot.pk).whole_diagnosis() == diagnosis
    read.error = "only this"
    read.save(update_fields=["error"])  # the table left as it is
    assert RankChunk.objects.filter(snapshot=snapshot).count() == 2


# What a row may hold, with what json and orjson write apart: text past ASCII, DEL, control
# characters, lone surrogates, floats json writes with an exponent, NaN and the infinities,
# ints past 64 bits, keys that are not strings, tuples.
_FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-4, 9.99e-5, 1e-5, 1e16, 9999999999999998.0, -0.0, 0.0, 0.501, 5e-324, math.nan]
)
_TEXTS = st.text() | st.sampled_from(
    ["node-0001", "\x7f", "\x00\x1f\b\f", "é", "\ud800", "a\u2028"]
)
_INTS = st.integers() | st.sampled_from([2**63 - 1, 2**64, -(2**63) - 1, True, False])
_SCALAR = st.none() | _FLOATS | _TEXTS | _INTS
_VALUES = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_TEXTS | st.integers(), inner, max_size=4)
    ),
    max_leaves=12,
)
_ROWS = st.lists(st.dictionaries(st.sampled_from(["rank", "node", "step_time", "frame"]),
                                 _VALUES) | _VALUES, max_size=6)  # fmt: skip


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(_ROWS)
def test_the_chunks_json_is_the_same_bytes_as_jsons(rows):
    assert rankstore.rows_json(rows) == json.dumps(rows, separators=(",", ":")).encode()


@pytest.mark.parametrize("field, trouble", [
    (None, None), ("step_time", 2.5e-05), ("step_time", 1e16), ("gpu_util", math.nan),
    ("gpu_util", math.inf), ("frame", "all_reduce (caf\xe9.py:1)"), ("frame", "a\x7fb"),
    ("node", "\ud800"), ("pid", 2**64), ("stack_group", (1, 2)), ("exit_code", [{3: 4}]),
])  # fmt: skip
def test_the_chunks_json_of_a_fleets_rows_is_jsons(field, trouble):
    """What json and orjson write apart, one trouble in one row of a plain table."""
    rows = fleet_diagnosis(300, suspect=120, missing=173)["per_rank"]
    if field is not None:
        rows[7][field] = trouble
    assert rankstore.rows_json(rows) == json.dumps(rows, separators=(",", ":")).encode()


class _Editor:
    """What the migration's functions use of a schema editor (SQLite's refuses to open inside
    the test's transaction)."""

    connection = connection

    def execute(self, sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)


def test_the_migration_moves_stored_tables_into_chunks_and_back(stored):
    snapshot, diagnosis = stored
    state = MigrationLoader(connection).project_state(("collectors", "0016_rank_chunks"))
    historical = state.apps.get_model("collectors", "Snapshot")  # a plain manager: as stored
    historical.objects.filter(pk=snapshot.pk).update(diagnosis=diagnosis)
    assert _head_in_the_database(snapshot.pk)["per_rank"] == diagnosis["per_rank"]

    migration.tables_apart(state.apps, _Editor())
    assert "per_rank" not in _head_in_the_database(snapshot.pk)
    read = Snapshot.objects.get(pk=snapshot.pk)
    assert read.whole_diagnosis() == diagnosis
    assert read.rank_row_json(2100) == diagnosis["per_rank"][2100]
    assert len(read.rank_field_values("last_step_at")) == 3

    migration.tables_back(state.apps, _Editor())
    assert _head_in_the_database(snapshot.pk) == diagnosis


def test_the_chunks_are_stored_uncompressed_by_toast():
    """zlib already: PostgreSQL would try (and fail) to compress them again."""
    if connection.vendor != "postgresql":
        pytest.skip("TOAST storage is PostgreSQL's; SQLite stores the bytes as given")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = "
            "'collectors_rankchunk'::regclass AND attname = 'rows'"
        )
        assert cursor.fetchone() == ("e",)
