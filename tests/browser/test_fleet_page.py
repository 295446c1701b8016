"""The incident page of a 32,000-rank job in chromium, under the console's CSP: it renders
with the chart drawn (the grouped view), the suspect and missing ranks listed first, and the
per-rank table pages (htmx) through every rank in rank order."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from incidents.services import incident_open
from tests.pages.fleet import fleet_diagnosis, fleet_snapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORLD, SUSPECT, MISSING = 32_000, 16_007, 24_001


def test_a_32000_rank_incident_page_renders_lists_suspects_first_and_pages(
    page, live_server, log_in, bob, cluster
):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    fleet_snapshot(incident, cluster, fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING))
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    log_in("bob")

    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.wait_for_selector("#rank-timeline .main-svg", timeout=30_000)
    expect(page.locator("#rank-timeline")).to_contain_text("32000 ranks")
    flagged = page.locator("table.flagged-ranks tbody tr")
    expect(flagged).to_have_count(2)
    expect(flagged.nth(0).locator("td").first).to_have_text(str(SUSPECT))
    expect(flagged.nth(1).locator("td").first).to_have_text(str(MISSING))

    page.click("details.rank-table summary")  # opening it loads the first page
    rows = page.locator("#rank-pages tbody tr")
    expect(rows).to_have_count(200, timeout=15_000)
    expect(rows.first.locator("td").first).to_have_text("0")
    page.click("#rank-pages a[rel=next]")
    expect(page.locator("#rank-pages")).to_contain_text("page 2 of 160", timeout=15_000)
    expect(rows.first.locator("td").first).to_have_text("200")
    page.fill("#rank-pages input[name=page]", str(SUSPECT // 200 + 1))
    page.click("#rank-pages button[type=submit]")
    expect(page.locator("#rank-pages tr.suspect td").first).to_have_text(
        str(SUSPECT), timeout=15_000
    )
    assert errors == []
