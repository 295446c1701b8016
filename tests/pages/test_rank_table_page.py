"""The per-rank table's page, one read (collectors/selectors.rank_page -> RankTablePage): a
page of rows in rank order, sliced in the database in one query, for a small job and a
2,000-rank one alike."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.models import Snapshot
from collectors.selectors import RANK_PAGE_ROWS, rank_page
from incidents.services import incident_open
from tests.pages.fleet import fleet_diagnosis, fleet_snapshot

pytestmark = pytest.mark.django_db


def _snapshot(bob, cluster, world: int) -> Snapshot:
    incident = incident_open(opened_by=bob, title=f"{world} ranks", cluster=cluster)
    snapshot = fleet_snapshot(incident, cluster, fleet_diagnosis(world, suspect=1, missing=2))
    return Snapshot.objects.only("pk", "incident_id", "rank_overview").get(pk=snapshot.pk)


def _count(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_a_page_of_the_table_in_rank_order_clamped_to_the_pages_there_are(bob, cluster):
    snapshot = _snapshot(bob, cluster, 2_000)
    page = rank_page(snapshot, 3)
    assert [r.rank for r in page.rows] == list(range(2 * RANK_PAGE_ROWS, 3 * RANK_PAGE_ROWS))
    assert (page.page, page.pages, page.first, page.last, page.total) == (
        3, 10, 400, 599, 2_000,
    )  # fmt: skip
    assert rank_page(snapshot, 99).page == 10 and rank_page(snapshot, -1).page == 1
    assert set(page.context()) == {"snapshot", "rows", "page", "pages", "first", "last", "total"}


def test_one_query_whatever_the_number_of_ranks(bob, cluster):
    small, large = _snapshot(bob, cluster, 8), _snapshot(bob, cluster, 2_000)
    assert [r.rank for r in rank_page(small, 1).rows] == list(range(8))
    assert _count(lambda: rank_page(small, 1)) == _count(lambda: rank_page(large, 7)) == 1
