"""The incident pages' one read each (pages/selectors.py): the list with each incident's
latest verdict, and the incident page, whose live poll reads the evidence only when the
verdict's key moved and then reads the timeline once (it used to build the page twice)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.forms import IncidentFilterForm
from incidents.models import TimelineEvent
from incidents.services import incident_add_note, incident_change_status, incident_open
from pages.selectors import incident_list_page, incident_page
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def analysed(bob, cluster, django_capture_on_commit_callbacks):
    def make(title: str = "hung", case: str = "mismatch"):
        incident = incident_open(opened_by=bob, title=title, cluster=cluster, severity="SEV2")
        with django_capture_on_commit_callbacks():
            snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot(case))
        snapshot_analyse(snapshot_id=snapshot.pk)
        return incident

    return make


def _queries(read) -> list[dict]:
    with CaptureQueriesContext(connection) as queries:
        read()
    return list(queries)  # now: the log is cut at the next request


def test_the_list_shows_the_chosen_incidents_with_their_latest_verdict(analysed, bob, cluster):
    hung = analysed("hung")
    quiet = incident_open(opened_by=bob, title="quiet", cluster=cluster, severity="SEV3")
    page = incident_list_page(IncidentFilterForm(None))
    assert {(i.title, i.verdict) for i in page.incidents} == {("hung", "B"), ("quiet", None)}
    incident_change_status(incident=quiet, to_status="resolved", by=bob, note="")
    active = incident_list_page(IncidentFilterForm({}))
    assert [i.pk for i in active.incidents] == [hung.pk]
    resolved = incident_list_page(IncidentFilterForm({"status": "resolved"}))
    assert [i.pk for i in resolved.incidents] == [quiet.pk]
    assert set(page.context()) == {"incidents", "filters"}


def test_the_list_reads_in_queries_that_do_not_grow_with_incidents(analysed):
    analysed("one")
    few = len(_queries(lambda: incident_list_page(IncidentFilterForm(None))))
    for index in range(4):
        analysed(f"more {index}", case="outside")
    assert len(_queries(lambda: incident_list_page(IncidentFilterForm(None)))) == few


def test_the_live_poll_reads_only_the_keys_while_the_verdict_holds(analysed, bob):
    incident = analysed()
    shown = incident_page(incident, bob)
    assert shown.view is not None and shown.guided is not None and shown.progress is not None
    held = incident_page(incident, bob, shown_verdict=shown.live.verdict)
    assert held.live == shown.live
    assert (held.view, held.guided, held.progress, held.decision) == (None, None, None, None)
    assert held.diagnosed.pk == shown.diagnosed.pk


def test_the_live_poll_reads_the_page_once_when_the_verdict_moved(analysed, bob):
    incident = analysed()
    full = incident_page(incident, bob)  # (and bob's roles, read once per user object)
    queries = _queries(lambda: incident_page(incident, bob, shown_verdict="an older key"))
    moved = incident_page(incident, bob, shown_verdict="an older key")
    assert moved.view.diagnosis.classification == full.view.diagnosis.classification
    assert moved.guided.call == full.guided.call and moved.live == full.live
    timeline = TimelineEvent._meta.db_table
    reads = [q["sql"] for q in queries if f'FROM "{timeline}"' in q["sql"]]
    assert len(reads) == 1, reads  # the events, read once for the timeline, keys and panel
    assert len(queries) <= len(_queries(lambda: incident_page(incident, bob))) + 1


def test_the_incident_page_reads_in_queries_that_do_not_grow_with_the_timeline(analysed, bob):
    incident = analysed()
    incident_page(incident, bob)  # bob's roles, read once per user object
    few = len(_queries(lambda: incident_page(incident, bob)))
    for index in range(15):
        incident_add_note(incident=incident, by=bob, text=f"note {index}", pinned=index % 2 == 0)
    assert len(_queries(lambda: incident_page(incident, bob))) == few
    live = len(_queries(lambda: incident_page(incident, bob, shown_verdict="old")))
    assert live <= few + 1


def test_the_live_answer_reads_the_timeline_once_when_the_verdict_moved(as_user, analysed, bob):
    incident = analysed()
    client = as_user(bob)
    url = f"/incidents/{incident.pk}/live/?version=-1&head=old&verdict=old&seen=0"
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(url).content.decode()
    assert 'id="diagnosis-region"' in answer and 'id="snapshot-region"' in answer
    timeline = TimelineEvent._meta.db_table
    assert sum(f'FROM "{timeline}"' in q["sql"] for q in queries) == 1


def test_while_a_new_snapshot_collects_the_held_verdict_is_not_read_for_the_keys(analysed, bob):
    from collectors import services

    incident = analysed()
    shown = incident_page(incident, bob)
    services.snapshot_create(incident=incident, by=bob)  # a new one, collecting
    keys = incident_page(incident, bob, shown_verdict=shown.live.verdict).live  # it moved
    held = incident_page(incident, bob, shown_verdict=keys.verdict)
    assert held.view is None and held.live == keys
    assert held.snapshot.pk != held.diagnosed.pk == shown.diagnosed.pk
    # Both read without their diagnosis JSON (a 32,000-rank one is megabytes).
    assert "diagnosis" in held.snapshot.get_deferred_fields()
    assert "diagnosis" in held.diagnosed.get_deferred_fields()
    moved = incident_page(incident, bob, shown_verdict=held.live.verdict + "-old")
    assert moved.view.diagnosis.classification == "B" and moved.diagnosed == held.diagnosed
