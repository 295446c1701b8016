"""The typed diagnosis: `from_json(to_json())` gives the same diagnosis back on every corpus case
and every lab capture, and diagnoses stored by older versions (tests/analysis/stored/, written
by the old code itself, see capture.py there) read back in today's shape with the verdict they
told the responders.

`collectors.bundles` imports Django settings (see test_corpus.py); no database is used.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis import diagnose
from analysis.diagnosis import Diagnosis
from analysis.records import RankRow, RankStatus, StackGroup
from analysis.schema import DIAGNOSIS_SCHEMA_VERSION, stored_version, upgrade
from collectors.bundles import read_bundle
from tests.analysis.sample_evidence import load_snapshot, split_nodes

HERE = Path(__file__).parent
CASES = sorted(p for p in (HERE / "corpus").iterdir() if p.is_dir())
STORED = sorted((HERE / "stored").glob("*.json"))
CAPTURES = {
    "outside": lambda: diagnose(load_snapshot("outside")),
    "crash": lambda: diagnose(load_snapshot("crash")),
    "mismatch": lambda: diagnose(load_snapshot("mismatch")),
    "mismatch-json-dumps": lambda: diagnose(load_snapshot("mismatch", fr_kind="json")),
    "init": lambda: diagnose(load_snapshot("init")),
    "tp-mismatch": lambda: diagnose(load_snapshot("tp-mismatch")),
    "tp-rank-stall": lambda: diagnose(load_snapshot("tp-rank-stall")),
    "outside-on-two-nodes": lambda: diagnose(split_nodes(load_snapshot("outside"))),
    "healthy-one-look": lambda: diagnose(load_snapshot("healthy", "snap1")),
    "healthy-two-looks": lambda: diagnose(
        load_snapshot("healthy", "snap1"), load_snapshot("healthy", "snap0")
    ),
    "straggler-two-looks": lambda: diagnose(
        load_snapshot("straggler", "snap1"), load_snapshot("straggler", "snap0")
    ),
}


def _stored_form(diagnosis: Diagnosis) -> dict:
    """What the database holds: the JSON text of to_json(), parsed back."""
    return json.loads(json.dumps(diagnosis.to_json()))


def _assert_round_trip(diagnosis: Diagnosis) -> None:
    stored = _stored_form(diagnosis)
    back = Diagnosis.from_json(stored)
    assert back.to_json() == stored
    # Typed equality too: every record came back as the same value (evidence text is capped
    # at storage, so compare with what was stored, read once).
    once = Diagnosis.from_json(stored)
    assert Diagnosis.from_json(_stored_form(once)) == once
    assert list(stored) == list(diagnosis.to_json()), "the stored order is the API's order"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_corpus_case_comes_back_from_json_unchanged(case: Path):
    _assert_round_trip(diagnose(read_bundle(case)))


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_every_lab_capture_comes_back_from_json_unchanged(name: str):
    _assert_round_trip(CAPTURES[name]())


def test_the_records_are_typed():
    diagnosis = Diagnosis.from_json(_stored_form(diagnose(load_snapshot("outside"))))
    assert all(isinstance(row, RankRow) for row in diagnosis.per_rank)
    assert all(isinstance(row.status, RankStatus) for row in diagnosis.per_rank)
    assert all(isinstance(group, StackGroup) for group in diagnosis.stack_groups)
    row = diagnosis.rank_row(3)
    assert row is not None and row.suspect and row.status is RankStatus.OUTSIDE
    assert row.last_step_at is not None and row.last_step_at.tzinfo is not None
    assert diagnosis.suspect_ranks_compact == "3"


@pytest.mark.parametrize("path", STORED, ids=[p.stem for p in STORED])
def test_a_diagnosis_stored_by_an_older_version_reads_in_todays_shape(path: Path):
    stored = json.loads(path.read_text())
    diagnosis = Diagnosis.from_json(stored)
    upgraded = diagnosis.to_json()
    today = diagnose(load_snapshot("outside")).to_json()
    assert list(upgraded) == list(today), "every field of today's schema, in its order"
    assert upgraded["schema_version"] == DIAGNOSIS_SCHEMA_VERSION
    # The verdict is the one the responders were shown, not a new one.
    for key in ("classification", "summary", "suspect_ranks", "missing_ranks", "world_size"):
        assert upgraded[key] == stored[key], key
    assert [r["status"] for r in upgraded["per_rank"]] == [r["status"] for r in stored["per_rank"]]
    assert upgraded["stack_groups"] == stored["stack_groups"]
    assert upgraded["evidence"] == stored["evidence"]
    # Read once more: an upgraded diagnosis is a current one.
    assert Diagnosis.from_json(json.loads(json.dumps(upgraded))).to_json() == upgraded


def test_the_stored_rows_cover_both_older_versions():
    versions = {stored_version(json.loads(p.read_text())) for p in STORED}
    assert versions == {1, 2}


def test_schema_1_had_no_unobserved_ranks_and_keeps_its_missing_ones():
    stored = json.loads((HERE / "stored" / "schema1-unreachable.json").read_text())
    assert "schema_version" not in stored and "unobserved_ranks" not in stored
    diagnosis = Diagnosis.from_json(stored)
    assert diagnosis.unobserved_ranks == () and diagnosis.rule == ""
    assert diagnosis.missing_ranks == tuple(stored["missing_ranks"])
    assert diagnosis.progress.method == stored["progress"]["method"]


def test_a_diagnosis_from_a_newer_version_is_read_by_the_fields_it_shares():
    stored = _stored_form(diagnose(load_snapshot("crash")))
    newer = {**stored, "schema_version": DIAGNOSIS_SCHEMA_VERSION + 1, "a_new_field": [1, 2]}
    diagnosis = Diagnosis.from_json(newer)
    assert diagnosis.classification == stored["classification"]
    assert diagnosis.to_json()["per_rank"] == stored["per_rank"]
    assert upgrade(newer)["schema_version"] == DIAGNOSIS_SCHEMA_VERSION + 1


def test_a_damaged_field_reads_as_its_default_not_as_a_crash():
    stored = _stored_form(diagnose(load_snapshot("outside")))
    damaged = {
        **stored,
        "per_rank": [{"rank": 0, "status": "beyond"}, "not a row", *stored["per_rank"][1:]],
        "progress": None,
        "confidence": "high",
        "collected_at": "yesterday",
    }
    diagnosis = Diagnosis.from_json(damaged)
    assert diagnosis.per_rank[0].status is RankStatus.UNOBSERVED  # a status that claims nothing
    assert len(diagnosis.per_rank) == len(stored["per_rank"])  # "not a row" is skipped
    assert diagnosis.progress.method == "none" and diagnosis.confidence == 0.0
    assert diagnosis.collected_at is None


def test_each_rows_step_time_is_written_as_its_own():
    # rows_json writes each distinct time once: equal times of one zone that print apart
    # (the hour a clock goes back, by fold; one instant in two zones) stay apart.
    from datetime import UTC, datetime, timedelta, timezone
    from zoneinfo import ZoneInfo

    from analysis.records import rows_json

    back = datetime(2026, 11, 1, 1, 30, tzinfo=ZoneInfo("America/New_York"))
    utc = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    times = [
        back, back.replace(fold=1), utc, utc.astimezone(timezone(timedelta(hours=2))),
        datetime(2026, 11, 1, 5, 30), datetime(2026, 11, 1, 5, 30), utc.replace(), None,
    ]  # fmt: skip
    rows = [RankRow(r, RankStatus.IN_COLLECTIVE, last_step_at=at) for r, at in enumerate(times)]
    written = [row["last_step_at"] for row in rows_json(rows)]
    assert written == [at.isoformat() if at else None for at in times]
    assert len(set(written[:4])) == 4
