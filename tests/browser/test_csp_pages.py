"""The incident, post-mortem, share and evidence pages in chromium under the console's
Content-Security-Policy: htmx and plotly work (the chart is drawn, a note goes in by htmx and
its form empties, the live poll asks, the editor's preview loads), and no page logs a console
error or a CSP violation. A node name carrying a link is drawn as text in the chart."""

from __future__ import annotations

import zlib

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from collectors.models import Artifact, NodeCollection, Snapshot, SnapshotStatus
from incidents.postmortem_saving import postmortem_save
from incidents.services import incident_open
from sharing.documents import freeze_published
from sharing.services import share_link_create
from tests.analysis.sample_evidence import diagnosis_json, drop_rank_process, load_snapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LINK_NODE = '<a href="https://evil.example/">gpu-x</a>'
# (The waits below use locators: a wait_for_function string is eval, which the CSP refuses.)
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " " + e.blockedURI);
});
"""


@pytest.fixture
def world(bob, cluster):
    incident = incident_open(opened_by=bob, title="run 7 hung", cluster=cluster)
    diagnosis = diagnosis_json(drop_rank_process(load_snapshot("outside"), 3))
    for row in diagnosis["per_rank"]:
        if row["rank"] == 3:
            row["node"] = LINK_NODE
    # The GPU strip beside the chart: three ranks spinning, rank 2 idle with memory held.
    diagnosis["gpu_shape"] = [
        {"rank": r, "node": "gpu-0", "gpu": r, "source": "nvidia-smi", "joined_by": "LOCAL_RANK",
         "reading": "idle" if r == 2 else "spin", "util": [0 if r == 2 else 100] * 10,
         "memory_mib": 30000, "since": None}
        for r in (0, 1, 2)
    ]  # fmt: skip
    snapshot = Snapshot.objects.create(
        incident=incident, cluster=cluster, status=SnapshotStatus.DONE,
        finished_at=timezone.now(), diagnosis=diagnosis,
    )  # fmt: skip
    collection = NodeCollection.objects.create(snapshot=snapshot, node_name="gpu-0")
    log = b"".join(b"step=%d loss=1.0\n" % n for n in range(200))
    artifact = Artifact.objects.create(
        collection=collection, name="logs/rank0.log", compressed=zlib.compress(log), size=len(log)
    )
    postmortem = postmortem_save(
        incident=incident, by=bob, status="published", summary="Rank 3 left.",
        classification="A", root_cause="OOM.", action_items="Smaller batches | infra | 2026-12-14",
    )  # fmt: skip
    freeze_published(incident, postmortem)
    _, token = share_link_create(incident=incident, by=bob, include_evidence=True)
    return {"incident": incident, "snapshot": snapshot, "artifact": artifact, "token": token}


def _watched(page) -> list[str]:
    errors: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    return errors


def _chart_drawn(page, selector: str) -> None:
    page.wait_for_selector(f"{selector} .main-svg", timeout=30_000)
    assert page.locator(f"{selector} svg a").count() == 0  # no link made from evidence


def test_the_pages_work_under_the_csp_without_a_console_error(
    browser, page, live_server, log_in, world
):
    errors = _watched(page)
    incident, snapshot, artifact = world["incident"], world["snapshot"], world["artifact"]
    log_in("bob")

    # The incident page: the chart (plotly fetched by rank-timeline.js), a note by htmx,
    # the live poll bringing it onto the timeline.
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    _chart_drawn(page, "#rank-timeline")
    assert LINK_NODE in page.locator("#rank-timeline").inner_text()  # the label, as text
    # The GPU strip: an SVG drawn on the server, its cells styled by the page's own CSS.
    expect(page.locator(".gpu-strip rect.gpu-cell")).to_have_count(30)
    idle = page.locator(".gpu-row.reading-idle rect.gpu-cell").first
    assert idle.evaluate("cell => getComputedStyle(cell).fill") == "rgb(217, 230, 242)"
    with page.expect_request(lambda r: "/live/" in r.url, timeout=20_000):
        page.fill("#note-form input[name=text]", "checked rank 3's dmesg")
        page.click("#note-form button[type=submit]")
    expect(page.locator("#note-form input[name=text]")).to_have_value("", timeout=10_000)
    page.wait_for_selector('#timeline-list :text("checked rank 3\'s dmesg")', timeout=20_000)

    # The post-mortem page: its chart, and the editor's preview loaded by htmx.
    page.goto(f"{live_server.url}/incidents/{incident.pk}/postmortem/?edit=1")
    _chart_drawn(page, "#document-chart")
    expect(page.locator("#postmortem-preview")).to_contain_text("Rank 3 left.", timeout=15_000)

    # The evidence: the snapshot's page and the artifact viewer with its search.
    page.goto(f"{live_server.url}/snapshots/{snapshot.pk}/?node=gpu-0")
    page.wait_for_selector("text=logs/rank0.log")
    page.goto(f"{live_server.url}/snapshots/{snapshot.pk}/artifacts/{artifact.pk}/view/")
    page.fill("#viewer-search", "step=150")
    page.keyboard.press("Enter")
    expect(page.locator("#viewer-count")).not_to_have_text("", timeout=10_000)

    # The shared page, logged out, in a browser of its own.
    visitor = browser.new_context()
    shared = visitor.new_page()
    shared_errors = _watched(shared)
    shared.goto(f"{live_server.url}/s/{world['token']}/")
    _chart_drawn(shared, "#document-chart")
    visitor.close()

    assert errors == [] and shared_errors == []
