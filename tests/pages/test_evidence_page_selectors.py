"""The guided workflow's evidence pages' one read each: a rank's lines
(pages/rank_page.rank_evidence_page) and two environments side by side
(pages/environment_page.environment_page), in a fixed number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.models import Snapshot
from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.services import incident_open
from pages.environment_page import env_rows, environment_page
from pages.rank_page import rank_evidence_page
from tests.analysis.sample_evidence import load_snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def outside(bob, cluster, django_capture_on_commit_callbacks) -> Snapshot:
    """Rank 3 stalled outside the collective, the others wait in it (4 ranks, 2 nodes)."""
    incident = incident_open(opened_by=bob, title="rank 3", cluster=cluster)
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("outside"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    return Snapshot.objects.select_related("incident", "incident__cluster").get(pk=snapshot.pk)


def _count(read) -> int:
    with CaptureQueriesContext(connection) as queries:
        read()
    return len(queries)


def test_a_ranks_page_holds_its_own_log_and_its_nodes_lines_in_one_query(outside):
    page = rank_evidence_page(outside, 3)
    assert page.rank == 3 and page.row.rank == 3 and page.node == page.row.node
    assert page.own and all(own["tail"].name.endswith("rank3.log") for own in page.own)
    assert page.incident == outside.incident and page.pids == [page.row.pid]
    assert set(page.context()) >= {"own", "about", "kernel", "dmesg", "row"}
    assert _count(lambda: rank_evidence_page(outside, 3)) == 1
    assert _count(lambda: rank_evidence_page(outside, 0)) == 1


def test_a_rank_the_snapshot_does_not_hold_has_an_empty_page(outside):
    page = rank_evidence_page(outside, 999)
    assert (page.row, page.node, page.own, page.about, page.kernel) == (None, "", [], [], [])


def test_the_environment_page_sets_the_suspect_beside_a_healthy_rank(outside):
    page = environment_page(outside)
    assert page.suspect.row.rank == 3 and page.healthy is not None and page.healthy.rank != 3
    assert not page.missing and page.rows
    assert page.differ_count == sum(r["differs"] for r in page.rows)
    assert _count(lambda: environment_page(outside)) == 2  # each rank's environ


def test_variables_that_differ_by_design_are_shown_but_not_counted():
    rows = env_rows({"RANK": "3", "NCCL_DEBUG": "INFO", "A": "1"}, {"RANK": "0", "A": "1"})
    assert [(r["name"], r["differs"], r["per_rank"]) for r in rows] == [
        ("NCCL_DEBUG", True, False),
        ("A", False, False),
        ("RANK", False, True),
    ]
