"""The per-rank table of a large job: the pages read the stored overview (analysis/rankview.py)
and the diagnosis without its table (cut in the database), list the suspect and missing ranks
first and the ranges of every state, and page through every rank in rank order."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from analysis.diagnosis import Diagnosis
from analysis.rankview import FIRST_ROWS, RankOverview, overview
from collectors.models import Snapshot
from collectors.selectors import RANK_PAGE_ROWS
from incidents.services import incident_open
from readings.rank_timeline import rank_timeline_figure
from tests.pages.fleet import fleet_diagnosis, fleet_snapshot

pytestmark = pytest.mark.django_db

WORLD, SUSPECT, MISSING = 2_000, 1_207, 1_733


@pytest.fixture
def fleet(bob, cluster):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    diagnosis = fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING)
    return incident, fleet_snapshot(incident, cluster, diagnosis), diagnosis


def _ranks_in(html: str) -> list[int]:
    return [
        int(r) for r in re.findall(r'<tr class="rank-[a-z_]+(?: suspect)?"><td>(\d+)</td>', html)
    ]


def test_the_overview_holds_flagged_rows_ranges_and_groups_and_reads_back():
    diagnosis = Diagnosis.from_json(fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING))
    made = overview(diagnosis)
    assert made.total == WORLD and made.flagged == 2
    assert [r.rank for r in made.flagged_rows] == [SUSPECT, MISSING]  # the suspect first
    assert [r.rank for r in made.first_rows][:3] == [0, 1, 2]
    assert len(made.rows) == 2 + FIRST_ROWS
    ranges = {s.status: (s.count, s.ranges) for s in made.by_status}
    assert ranges["missing"] == (1, str(MISSING))
    assert ranges["in_collective"][0] == WORLD - 2
    assert (
        ranges["in_collective"][1]
        == f"0-{SUSPECT - 1}, {SUSPECT + 1}-{MISSING - 1}, {MISSING + 1}-{WORLD - 1}"
    )
    assert RankOverview.from_json(made.to_json()) == made
    # The chart drawn from the overview is the one drawn from the whole table.
    assert rank_timeline_figure(diagnosis, made) == rank_timeline_figure(diagnosis)


def test_the_incident_page_lists_suspects_first_and_not_every_rank(client, bob, fleet):
    incident, snapshot, _ = fleet
    client.force_login(bob)
    html = client.get(incident.get_absolute_url()).content.decode()
    flagged = html[html.index('id="flagged-ranks"') :]
    assert _ranks_in(flagged)[:2] == [SUSPECT, MISSING]
    assert len(_ranks_in(html)) == 2  # no other rank row: those come a page at a time
    assert f"{MISSING + 1}-{WORLD - 1}" in html  # the ranges of every state
    assert f'hx-get="{reverse("collectors:ranks", args=[snapshot.pk])}?page=1"' in html
    assert "Every rank (2000), 10 pages" in html


def test_the_rank_pages_slice_the_table_in_rank_order(client, bob, fleet):
    _, snapshot, _ = fleet
    client.force_login(bob)
    url = reverse("collectors:ranks", args=[snapshot.pk])
    second = client.get(f"{url}?page=2", HTTP_HX_REQUEST="true").content.decode()
    assert _ranks_in(second) == list(range(RANK_PAGE_ROWS, 2 * RANK_PAGE_ROWS))
    assert "<html" not in second  # the fragment htmx swaps in
    last = client.get(f"{url}?page=last").content.decode()
    assert _ranks_in(last) == list(range(WORLD - RANK_PAGE_ROWS, WORLD))
    assert "<html" in last and "page 10 of 10" in last  # a page of its own without htmx
    for junk in ("0", "-3", "x", "9" * 5000):
        assert _ranks_in(client.get(f"{url}?page={junk}").content.decode())[0] in (0, 1800)
    suspect_page = client.get(f"{url}?page={SUSPECT // RANK_PAGE_ROWS + 1}").content.decode()
    assert f'<tr class="rank-outside suspect"><td>{SUSPECT}</td>' in suspect_page


def test_a_diagnosis_stored_before_overviews_still_shows_its_table(client, bob, cluster):
    incident = incident_open(opened_by=bob, title="old snapshot", cluster=cluster)
    diagnosis = fleet_diagnosis(300, suspect=7, missing=9)
    snapshot = fleet_snapshot(incident, cluster, diagnosis, overview=False)
    client.force_login(bob)
    html = client.get(incident.get_absolute_url()).content.decode()
    assert _ranks_in(html[html.index('id="flagged-ranks"') :])[:2] == [7, 9]
    page = client.get(reverse("collectors:ranks", args=[snapshot.pk]) + "?page=2").content.decode()
    assert _ranks_in(page) == list(range(200, 300))


# The diagnosis column itself in a select list (not its head, cut in the database).
_WHOLE_DIAGNOSIS = re.compile(r'"collectors_snapshot"\."diagnosis"(,| FROM)')


def test_the_incident_page_never_fetches_the_whole_diagnosis(client, bob, fleet):
    """Asking whether a provisional verdict is still shown once loaded the deferred column
    (12 MB at 32,000 ranks) on every view of the page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    incident, _, _ = fleet
    client.force_login(bob)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(incident.get_absolute_url()).status_code == 200
    whole = [q["sql"][:200] for q in queries if _WHOLE_DIAGNOSIS.search(q["sql"])]
    assert not whole


def test_a_page_reads_the_diagnosis_without_its_table(fleet):
    _, snapshot, diagnosis = fleet
    light = Snapshot.objects.for_pages().get(pk=snapshot.pk)
    read = light.read_diagnosis()
    assert "diagnosis" in light.get_deferred_fields()  # the 12 MB column never came
    assert read.summary == diagnosis["summary"] and read.world_size == WORLD
    assert read.rank_row(SUSPECT).suspect and read.rank_row(MISSING) is not None
    assert len(read.per_rank) == 2 + FIRST_ROWS


def test_a_small_job_keeps_its_whole_table_on_the_page(client, bob, cluster):
    incident = incident_open(opened_by=bob, title="small", cluster=cluster)
    fleet_snapshot(incident, cluster, fleet_diagnosis(16, suspect=5, missing=11))
    client.force_login(bob)
    html = client.get(incident.get_absolute_url()).content.decode()
    assert _ranks_in(html)[:2] == [5, 11] and sorted(_ranks_in(html)) == list(range(16))
    assert 'id="flagged-ranks"' not in html and "<details open" in html


def test_the_shared_documents_chart_comes_from_the_overview(fleet):
    from sharing.documents import live_parts

    incident, _, diagnosis = fleet
    parts = live_parts(incident)
    assert parts["figure"] == rank_timeline_figure(Diagnosis.from_json(diagnosis))
    assert parts["verdict"]["ranks_seen"] == WORLD - 1
