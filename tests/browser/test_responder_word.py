"""Issue 19 clicked through in chromium: the responder's answers are recorded as chosen and
carried to the next snapshot, a refused publish keeps its text, a phone at 390 px scrolls no
page sideways and reaches every action, and an anchor lands below the sticky head.

Evidence comes from captured bundles analysed in the test (no lab): what is tried here is the
pages, not the collection."""

from __future__ import annotations

import pytest

from collectors.services import snapshot_analyse
from collectors.starts import snapshot_import_bundle
from incidents.models import EventKind, PostMortem
from incidents.postmortem_saving import postmortem_save
from incidents.services import incident_open
from sharing.services import share_link_create
from tests.analysis.sample_evidence import load_snapshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
SIGKILL = "Killed with SIGKILL (exit code 137) by someone other than the OOM killer"


def _analysed(incident, capture, sample: str = "outside"):
    with capture():
        snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot(sample))
    snapshot_analyse(snapshot_id=snapshot.pk)
    snapshot.refresh_from_db()
    return snapshot


@pytest.fixture
def worked(bob, cluster, django_capture_on_commit_callbacks):
    """An incident opened by the system (as the watch or the demo opens one), with a verdict."""
    incident = incident_open(opened_by=None, title="rank 3 left", cluster=cluster, source="demo")
    return incident, _analysed(incident, django_capture_on_commit_callbacks)


def _phone(browser, live_server, username: str):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"{username}-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return context, page


def _scrolls_sideways(page) -> int:
    """How far the page reaches past the viewport's width (0: it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def _head_bottom(page) -> float:
    return page.evaluate("document.querySelector('.incident-top').getBoundingClientRect().bottom")


def test_a_chosen_answer_is_recorded_as_chosen_and_carried_to_the_next_snapshot(
    page, live_server, log_in, bob, worked, django_capture_on_commit_callbacks
):
    incident, first = worked
    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    why = page.locator("#guided-why")
    button = why.locator("button[type=submit]")
    assert button.inner_text() == "Confirm"  # the evidence's own answer is selected
    why.locator("select[name=answer]").select_option(label=SIGKILL)
    assert button.inner_text() == "Override"  # the one button says what it will record
    why.locator("input[name=note]").fill("the launcher says signal 9")
    button.click()
    page.wait_for_selector("#guided-why .answer")
    answer = incident.events.get(kind=EventKind.ANSWER)
    assert (answer.details["answer"], answer.details["agreed"]) == ("killed", False)

    page.reload()  # the form shows what was recorded, not the suggestion again
    why = page.locator("#guided-why")
    assert "Overridden: " + SIGKILL in why.inner_text()
    assert why.locator("select[name=answer]").input_value() == "killed"
    assert why.locator("button[type=submit]").inner_text() == "Override"

    # The second snapshot ("slow or dead?") keeps what the responder said about the first.
    second = _analysed(incident, django_capture_on_commit_callbacks)
    page.reload()
    page.wait_for_selector(f"#guided:has-text('snapshot {second.pk}')")
    assert "1 of 4 answered (1 on an earlier snapshot)" in page.inner_text("#guided-count")
    why = page.locator("#guided-why")
    assert f"answered on snapshot {first.pk}" in why.inner_text()
    assert why.locator("select[name=answer]").input_value() == "killed"
    page.goto(f"{live_server.url}/snapshots/{second.pk}/")
    answers = page.inner_text("#answers")
    assert SIGKILL in answers and f"answered on snapshot {first.pk}" in answers


def test_a_refused_publish_keeps_the_text_as_a_draft(page, live_server, log_in, bob, worked):
    incident, _ = worked
    log_in("bob")
    page.goto(f"{live_server.url}/incidents/{incident.pk}/postmortem/")
    detection = page.input_value("textarea[name=detection]")
    assert "Incident opened by the demo" in detection and "the API" not in detection
    page.fill("textarea[name=root_cause]", "rank 3 was SIGKILLed by the cgroup limit")
    page.fill("textarea[name=action_items]", "Raise the cgroup limit | bob | next week")
    page.select_option("select[name=status]", "published")
    page.click("#save-postmortem")
    page.wait_for_selector(".flash.error:has-text('Your text is saved as version 1 (draft)')")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")  # leave the page...
    page.goto(f"{live_server.url}/incidents/{incident.pk}/postmortem/")  # ...and come back
    page.click("#postmortem-editor summary")
    assert "SIGKILLed by the cgroup limit" in page.input_value("textarea[name=root_cause]")
    assert PostMortem.objects.get().status == "draft"


def test_a_phone_reaches_every_page_and_action_without_sideways_scrolling(
    browser, live_server, alice, bob, cluster, worked
):
    incident, _ = worked
    postmortem_save(
        incident=incident,
        by=bob,
        status="published",
        summary="Rank 3 was killed.",
        root_cause="A memory cgroup limit.",
        action_items="Raise the limit | bob | 2026-12-24",
    )
    _, token = share_link_create(incident=incident, by=bob)
    context, page = _phone(browser, live_server, "alice")
    try:
        page.goto(f"{live_server.url}{incident.get_absolute_url()}")
        page.wait_for_selector("#rank-timeline .main-svg")
        assert _scrolls_sideways(page) == 0
        head = page.locator(".incident-top").bounding_box()
        assert head["height"] < 60  # one line, not half the screen
        assert not page.is_visible("#snapshot-button")  # folded into the menu...
        page.tap("#incident-menu-toggle")
        actions = ("#snapshot-button", "#acknowledge-button", ".action-bar button[value=resolved]")
        for action in actions:
            box = page.locator(action).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], action
        page.tap("#incident-menu-toggle")
        # The chart's legend sits below its title, and the stack-group table in its card.
        title = page.locator("#rank-timeline .gtitle").bounding_box()
        legend = page.locator("#rank-timeline .legend").bounding_box()
        assert legend["y"] >= title["y"] + title["height"]
        card = page.locator("#diagnosis").bounding_box()
        groups = page.locator("table.groups").bounding_box()
        assert groups["x"] + groups["width"] <= card["x"] + card["width"]

        for path, action in (
            (f"/clusters/{cluster.name}/", "button.test-connection"),
            (f"/incidents/{incident.pk}/postmortem/", "#postmortem-actions a"),
        ):
            page.goto(f"{live_server.url}{path}")
            assert _scrolls_sideways(page) == 0, path
            box = page.locator(action).first.bounding_box()
            assert box and box["x"] + box["width"] <= PHONE["width"], (path, action)
        page.tap(".topbar .menu-toggle")  # the site's menu folds too
        assert page.is_visible("nav a:text('Clusters')")
        page.goto(f"{live_server.url}/s/{token}/")
        assert _scrolls_sideways(page) == 0
    finally:
        context.close()


@pytest.mark.parametrize(
    "viewport", [PHONE, {"width": 1280, "height": 900}], ids=["phone", "desktop"]
)
def test_an_anchor_lands_below_the_sticky_head(browser, live_server, bob, worked, viewport):
    incident, _ = worked
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(f"{live_server.url}/login/")
        page.fill("input[name=username]", "bob")
        page.fill("input[name=password]", "bob-password")
        page.click("button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        page.goto(f"{live_server.url}{incident.get_absolute_url()}#guided-slow_or_dead")
        page.wait_for_load_state("load")
        target = page.locator("#guided-slow_or_dead").bounding_box()
        assert page.evaluate("window.scrollY") > 0  # it did jump
        assert target["y"] >= _head_bottom(page)  # and the head does not cover the target
    finally:
        context.close()
