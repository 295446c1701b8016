"""Issue 13 clicked through: a lab incident is snapshotted, its guided branch walked (one
override), the post-mortem written and published, a share link made, opened logged-out in a
fresh browser context (post-mortem and chart there, nothing else reachable), revoked, refused."""

from __future__ import annotations

import re

import pytest

from clusters.importing import cluster_import
from incidents.models import EventKind, PostMortem
from incidents.services import incident_open
from sharing.models import ShareLink, ShareView

pytestmark = [
    pytest.mark.lab,
    pytest.mark.worker,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

LONG = 120_000


@pytest.fixture(scope="module")
def hung_lab(hung_rank_exit_lab):
    return hung_rank_exit_lab  # the session's: this module only observes it


def _screenshot(page, name: str) -> None:
    from django.conf import settings

    folder = settings.VAR_DIR / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)


def test_a_lab_incident_from_snapshot_to_a_revoked_share_link(
    hung_lab, celery_worker_process, browser, page, live_server, log_in, bob
):
    cluster = cluster_import(hung_lab.info).cluster
    incident = incident_open(opened_by=bob, title="run stuck at step 5", cluster=cluster)

    # Snapshot, then the guided branch of class A.
    log_in("bob")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.click("#snapshot-button")
    page.wait_for_selector("#snapshot-progress[data-status=done]", timeout=LONG)
    try:
        page.wait_for_selector("#guided", timeout=15_000)
    except Exception:  # the live poll may not have swapped it in yet: a reload shows it
        page.reload()
        page.wait_for_selector("#guided")
    who = page.locator("#guided-who")
    assert "Rank 3" in who.inner_text()
    who.locator("button:has-text('Confirm')").click()
    page.wait_for_selector("#guided-who .answer")
    why = page.locator("#guided-why")
    suggested = why.locator("select[name=answer]").input_value()
    other = "oom" if suggested != "oom" else "killed"
    why.locator("select[name=answer]").select_option(other)
    why.locator("input[name=note]").fill("dmesg: the memory cgroup killed it")
    why.locator("button:has-text('Override')").click()  # the one button follows the choice
    page.wait_for_selector("#guided-why .answer")
    assert "Overridden: " in page.locator("#guided-why").inner_text()
    answers = incident.events.filter(kind=EventKind.ANSWER).order_by("pk")
    assert [(a.author.username, a.details["agreed"]) for a in answers] == [
        ("bob", True),
        ("bob", False),
    ]
    _screenshot(page, "guided-branch-a.png")

    # The branch's last button: resolved, and the post-mortem drafted from all of it.
    page.click("#guided-resolve")
    page.wait_for_selector("#postmortem-form")
    summary = page.locator("textarea[name=summary]").input_value()
    assert summary.startswith("The job (4 ranks) stopped after step")
    assert "Rank 3 on" in summary
    assert (
        "dmesg: the memory cgroup killed it"
        in page.locator("textarea[name=root_cause]").input_value()
    )
    page.fill(
        "textarea[name=impact]",
        "**4 ranks** idle for the incident. <script>window.pwned = 1</script>",
    )
    page.wait_for_selector("#postmortem-preview strong:has-text('4 ranks')")
    assert page.evaluate("window.pwned") is None
    page.select_option("select[name=status]", "published")
    page.click("#save-postmortem")
    page.wait_for_selector("#postmortem-status:has-text('Published')")
    assert PostMortem.objects.get().status == "published"

    # A share link, shown once.
    page.click("#share-links-link")
    page.fill("input[name=label]", "for the training team")
    page.check("input[name=include_evidence]")
    page.click("#share-form button[type=submit]")
    share_url = page.locator("#share-url").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(live_server.url)}/s/[A-Za-z0-9_-]{{43}}/", share_url)

    # Opened in a fresh, logged-out browser.
    outsider = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        visitor = outsider.new_page()
        visitor.set_default_timeout(30_000)
        response = visitor.goto(share_url)
        assert response.status == 200
        assert response.headers["x-robots-tag"].startswith("noindex")
        assert response.headers["referrer-policy"] == "no-referrer"
        visitor.wait_for_selector("h1:has-text('Post-mortem')")
        visitor.wait_for_selector("#document-chart .main-svg")  # plotly drew the rank timeline
        assert "4 ranks" in visitor.locator("#pm-impact").inner_text()
        assert "HF_TOKEN" not in visitor.content() or "[REDACTED:" in visitor.content()
        assert visitor.locator("a").count() == 0  # nothing to follow
        assert outsider.cookies() == []
        _screenshot(visitor, "shared-postmortem.png")
        # Nothing else answers this browser.
        for path in (incident.get_absolute_url(), f"/incidents/{incident.pk}/share/", "/admin/"):
            visitor.goto(f"{live_server.url}{path}")
            assert "/login/" in visitor.url, path
        api = visitor.goto(f"{live_server.url}/api/v1/incidents/")
        assert api.status in (401, 403)

        # Revoked: the same browser is refused, with the neutral page.
        page.click(f"#link-{ShareLink.objects.get().pk} button:has-text('Revoke')")
        page.wait_for_selector(".link-revoked")
        refused = visitor.goto(share_url)
        assert refused.status == 404
        assert visitor.locator("h1").inner_text() == "This link is no longer available"
        # (the login page it was sent to above set a CSRF cookie; the shared pages set none)
        assert "set-cookie" not in refused.headers
    finally:
        outsider.close()
    view = ShareView.objects.get()
    assert view.ip == "127.0.0.1" and "Chrome" in view.user_agent
