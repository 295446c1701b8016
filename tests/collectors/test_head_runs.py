"""The diagnosis head stored with its long rank lists as runs (collectors/headruns.py): the
stored JSON is smaller, and every reader of the field reads the head that was made."""

from __future__ import annotations

import importlib
import json

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from analysis.diagnosis import Diagnosis
from collectors import headruns
from collectors.models import SNAPSHOT_FLOW, Snapshot, SnapshotStatus
from collectors.services import rank_overview
from core.services import api_token_create
from incidents.services import incident_open
from tests.pages.fleet import fleet_diagnosis

WORLD = 3000
migration = importlib.import_module("collectors.migrations.0018_diagnosis_rank_runs")


def _whole_world(diagnosis: dict) -> dict:
    """A stack group and a flight-recorder stop over every rank but one, as a rank-gone
    verdict at 32,000 ranks has them (five lists of the world, the stop twice)."""
    everyone = [r for r in range(WORLD) if r != 1733]
    diagnosis["stack_groups"][0]["rank_list"] = everyone
    side = {"op": "all_reduce", "rank_list": everyone, "ranks": "0-1732, 1734-2999"}
    stop = {"pg": "0", "seq": 6, "kind": "missing_ranks", "missing_rank_list": [1733],
            "victims": everyone, "culprits": [1733], "waiting_elsewhere": [],
            "collectives": [side]}  # fmt: skip
    diagnosis["flight_recorder"] = {**(diagnosis.get("flight_recorder") or {}),
                                    "first_mismatch": stop, "stops": [dict(stop)]}  # fmt: skip
    return diagnosis


@pytest.fixture
def made(bob, cluster):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    snapshot = Snapshot.objects.create(
        incident=incident, cluster=cluster, status=SnapshotStatus.ANALYSING
    )
    return snapshot, _whole_world(fleet_diagnosis(WORLD, suspect=1207, missing=1733))


def _stored_text(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT diagnosis FROM collectors_snapshot WHERE id = %s", [pk])
        (text,) = cursor.fetchone()
    return text if isinstance(text, str) else json.dumps(text)


@pytest.mark.django_db
def test_the_verdicts_head_is_stored_as_runs_and_read_back_as_made(made):
    snapshot, diagnosis = made
    SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk), SnapshotStatus.DONE,
        diagnosis=diagnosis, rank_overview=rank_overview(diagnosis),
    )  # fmt: skip
    head = {k: v for k, v in diagnosis.items() if k != "per_rank"}
    text = _stored_text(snapshot.pk)
    stored = json.loads(text)
    assert stored[headruns.RUNS] == 1
    assert stored["flight_recorder"]["stops"][0]["victims"] == {
        headruns.RUNS: [0, 1732, 1734, WORLD - 1]
    }
    assert len(text) * 4 < len(json.dumps(head))  # five lists of the world, a few ints each
    # Every reader of the field: the row, a page's head, the whole diagnosis, the values.
    read = Snapshot.objects.get(pk=snapshot.pk)
    assert read.diagnosis == head
    assert read.whole_diagnosis() == diagnosis
    assert read.read_diagnosis() == Diagnosis.from_json(diagnosis)
    page = Snapshot.objects.for_pages().get(pk=snapshot.pk)
    assert page.read_diagnosis().flight_recorder == Diagnosis.from_json(head).flight_recorder
    assert page.read_diagnosis().stack_groups == Diagnosis.from_json(head).stack_groups
    assert Snapshot.objects.filter(pk=snapshot.pk).values_list("diagnosis", flat=True).get() == head
    assert read.classification == diagnosis["classification"]  # generated from the stored head


def _stored_as_lists(pk: int, head: dict) -> None:
    """The head written as the code before this one stored it (no runs), past the field."""
    sql = "UPDATE collectors_snapshot SET diagnosis = %s WHERE id = %s"
    if connection.vendor == "postgresql":
        sql = "UPDATE collectors_snapshot SET diagnosis = %s::jsonb WHERE id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [json.dumps(head), pk])


@pytest.mark.django_db
def test_the_api_serves_a_head_stored_as_runs_as_it_serves_one_stored_as_lists(made, carol):
    snapshot, diagnosis = made
    SNAPSHOT_FLOW.move(
        Snapshot.objects.filter(pk=snapshot.pk), SnapshotStatus.DONE,
        diagnosis=diagnosis, rank_overview=rank_overview(diagnosis),
    )  # fmt: skip
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=carol, name='t')[1]}")
    url = f"/api/v1/snapshots/{snapshot.pk}/diagnosis/"
    as_runs = client.get(url).json()
    _stored_as_lists(snapshot.pk, {k: v for k, v in diagnosis.items() if k != "per_rank"})
    assert headruns.RUNS not in _stored_text(snapshot.pk)
    assert client.get(url).json() == as_runs
    stop = as_runs["flight_recorder"]["stops"][0]
    assert (
        stop["victims"]
        == stop["collectives"][0]["rank_list"]
        == [r for r in range(WORLD) if r != 1733]
    )
    assert as_runs["flight_recorder"]["first_mismatch"] == stop


@pytest.mark.django_db
def test_a_saved_head_is_stored_as_runs_and_the_instance_keeps_what_it_was_given(made):
    snapshot, diagnosis = made
    snapshot.diagnosis = diagnosis
    snapshot.save()
    assert snapshot.diagnosis is diagnosis
    assert json.loads(_stored_text(snapshot.pk))[headruns.RUNS] == 1
    assert Snapshot.objects.get(pk=snapshot.pk).whole_diagnosis() == diagnosis


@pytest.mark.django_db
def test_a_head_with_a_runs_key_of_its_own_is_stored_as_it_is(made):
    snapshot, diagnosis = made
    diagnosis["env_diffs"] = [{"name": "X", "values": [{headruns.RUNS: [0, 5000]}]}]
    Snapshot.objects.filter(pk=snapshot.pk).update(diagnosis=diagnosis)
    stored = json.loads(_stored_text(snapshot.pk))
    assert headruns.RUNS not in stored
    assert len(stored["stack_groups"][0]["rank_list"]) == WORLD - 1
    assert Snapshot.objects.get(pk=snapshot.pk).whole_diagnosis() == diagnosis


@pytest.mark.django_db
def test_migrated_back_the_heads_stored_as_runs_are_lists_again(made):
    snapshot, diagnosis = made
    Snapshot.objects.filter(pk=snapshot.pk).update(diagnosis=diagnosis)
    assert headruns.RUNS in json.loads(_stored_text(snapshot.pk))
    before = MigrationLoader(connection).project_state(("collectors", "0017_artifact_lz4"))
    migration.lists_again(before.apps, None)
    stored = json.loads(_stored_text(snapshot.pk))
    assert headruns.RUNS not in stored
    assert stored == {k: v for k, v in diagnosis.items() if k != "per_rank"}


def test_only_long_strictly_ascending_lists_of_ints_worth_it_become_runs():
    long = list(range(100, 100 + headruns.RUNS_FROM))
    head = {
        "whole": long,
        "short": long[: headruns.RUNS_FROM - 1],
        "unsorted": long[::-1],
        "repeated": sorted([*long, 150]),
        "bools": [True, *long[1:]],
        "scattered": list(range(0, 8 * headruns.RUNS_FROM, 8)),  # as long again as runs
        "floats": [float(r) for r in long],
        "nested": [[long], {"a": long, "b": "text"}],
    }
    stored = headruns.stored(head)
    assert stored["whole"] == {headruns.RUNS: [100, 100 + headruns.RUNS_FROM - 1]}
    for name in ("short", "unsorted", "repeated", "bools", "scattered", "floats"):
        assert stored[name] is head[name], name
    assert stored["nested"] == [[stored["whole"]], {"a": stored["whole"], "b": "text"}]
    assert head["whole"] == long  # the made head is left as it was
    assert headruns.read(json.loads(json.dumps(stored))) == head


def test_what_the_head_did_not_write_is_read_as_it_is():
    runs = {headruns.RUNS: [0, 10]}
    for head in (None, [1, 2], "text", {"a": runs}):  # no flag: not a stored head
        assert headruns.read(head) == head
    for bad in ([0], [5, 1], [0, 3, 2, 9], [0, True], "0-3", [0, headruns.MOST_RANKS]):
        stored = {headruns.RUNS: 1, "a": {headruns.RUNS: bad}}
        assert headruns.read(stored) == {"a": {headruns.RUNS: bad}}, bad


_ranks = st.lists(st.integers(-3, 400), max_size=300).map(lambda xs: sorted(set(xs)))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | _ranks,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=5), _json, max_size=5))
def test_any_head_reads_back_to_the_same_json_bytes(head):
    assume(head.get(headruns.RUNS) != 1)  # the flag itself: no diagnosis has the key
    stored = json.loads(json.dumps(headruns.stored(head)))
    assert json.dumps(headruns.read(stored)) == json.dumps(head)
