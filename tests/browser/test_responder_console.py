"""The 3 a.m. pass (issue 12), clicked through in chromium: what a tired responder touches."""

from __future__ import annotations

import pytest

from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.models import EventKind, Incident
from incidents.services import incident_open
from tests.analysis.sample_evidence import load_snapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _in_viewport(page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    height = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= height


def test_a_system_opened_incident_is_edited_and_acknowledged_in_place(
    page, live_server, log_in, bob, cluster
):
    incident = incident_open(
        opened_by=None, title="Demo: stopped making progress", cluster=cluster, severity="SEV2"
    )
    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.evaluate("window.notReloaded = true")
    page.click(".edit-incident summary")
    page.select_option("select[name=severity]", "SEV1")
    page.fill("input[name=title]", "Demo: rank 3 is gone")
    page.click(".edit-incident button[type=submit]")
    page.wait_for_selector("#actions-feedback .flash.success:has-text('Saved.')")
    page.wait_for_selector("#head-region .sev.sev1")  # the head follows without a reload
    page.wait_for_selector("h1:has-text('Demo: rank 3 is gone')")

    page.click("#acknowledge-button")
    page.wait_for_selector("#incident-status:has-text('Investigating')")
    page.wait_for_selector("#incident-commander:has-text('bob')")
    assert page.evaluate("window.notReloaded") is True
    incident.refresh_from_db()
    assert (incident.severity, incident.status, incident.commander.username) == (
        "SEV1",
        "investigating",
        "bob",
    )
    assert incident.opened_by is None
    kinds = list(incident.events.values_list("kind", flat=True))
    assert kinds == [EventKind.OPENED, EventKind.EDIT, EventKind.STATUS]


def test_a_refused_bundle_says_so_next_to_the_import_button(
    page, live_server, log_in, bob, cluster, tmp_path
):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    bogus = tmp_path / "evidence.tar.gz"
    bogus.write_bytes(b"this is not a gzip file at all")
    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.click(".bundle-import summary")
    page.set_input_files(".bundle-import input[type=file]", str(bogus))
    page.click(".bundle-import button[type=submit]")
    page.wait_for_selector("#import-feedback .flash.error")
    text = page.inner_text("#import-feedback")
    assert text.startswith("Bundle evidence.tar.gz refused:")
    assert _in_viewport(page, "#import-feedback .flash.error")
    assert page.evaluate("window.scrollY") == 0  # nothing jumped to an anchor
    assert not Incident.objects.get().snapshots.exists()


def test_a_colleagues_note_appears_in_an_open_tab_without_a_reload(
    browser, page, live_server, log_in, bob, alice, cluster
):
    incident = incident_open(opened_by=bob, title="hung", cluster=cluster, severity="SEV1")
    url = f"{live_server.url}{incident.get_absolute_url()}"
    log_in("bob")
    page.goto(url)
    page.evaluate("window.notReloaded = true")

    other = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        colleague = other.new_page()
        colleague.set_default_timeout(15_000)
        colleague.goto(f"{live_server.url}/login/")
        colleague.fill("input[name=username]", "alice")
        colleague.fill("input[name=password]", "alice-password")
        colleague.click("button[type=submit]")
        colleague.wait_for_url(f"{live_server.url}/")
        colleague.goto(url)
        colleague.fill("#note-form input[name=text]", "lab-node-1: dmesg shows the OOM killer")
        colleague.click("#note-form button[type=submit]")
        colleague.wait_for_selector("#actions-feedback:has-text('Note added')")
        assert colleague.input_value("#note-form input[name=text]") == ""  # ready for the next
    finally:
        other.close()

    page.wait_for_selector("#timeline-list :text('dmesg shows the OOM killer')", timeout=10_000)
    page.wait_for_selector("#live-news:has-text('1 new on the timeline')")
    assert page.evaluate("window.notReloaded") is True


def test_the_evidence_viewer_marks_the_line_the_verdict_quotes(
    page, live_server, log_in, bob, cluster, django_capture_on_commit_callbacks
):
    incident = incident_open(opened_by=bob, title="crashed", cluster=cluster, severity="SEV1")
    with django_capture_on_commit_callbacks():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("crash"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    quote = snapshot.diagnosis["evidence"][3]["text"]

    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.click(f"a[href='/snapshots/{snapshot.pk}/evidence/3/']")
    page.wait_for_selector("table.lines")
    marked = page.locator("tr.quoted.target")
    assert marked.count() == 1
    assert quote in marked.inner_text()
    assert _in_viewport(page, "tr.quoted.target")  # the page opens at the line
    page.fill("#viewer-search", "SIGTERM")
    page.wait_for_selector("#viewer-count:has-text('matching lines')")
    assert page.locator("tr.match").count() >= 1
    page.click(f"a:has-text('Back to {incident.reference}')")
    page.wait_for_selector("#diagnosis")
