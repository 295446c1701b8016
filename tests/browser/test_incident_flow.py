"""The foundation's promise, clicked through in a real browser."""

import pytest

from clusters.models import Node
from incidents.models import Incident
from tests.conftest import HOST_KEY

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_registers_a_cluster_and_responder_works_an_incident(
    page, live_server, log_in, alice, bob
):
    log_in("alice")
    page.click("text=Clusters")
    page.click("text=New cluster")
    page.fill("input[name=name]", "gpt-train")
    page.fill("textarea[name=log_globs]", "/var/log/train/*.log")
    page.click("button:has-text('Save')")
    page.wait_for_selector("h1:has-text('gpt-train')")

    page.fill("input[name=name]", "gpu-0")
    page.fill("input[name=address]", "not a host!")
    page.fill("textarea[name=host_key]", HOST_KEY)
    page.click("button:has-text('Add node')")
    assert (
        page.locator(".error")
        .first.inner_text()
        .endswith("is not a host: use an IP address or a host name such as gpu-node-17.")
    )

    page.fill("input[name=address]", "127.0.9.1")
    page.click("button:has-text('Add node')")
    page.wait_for_selector("td:has-text('gpu-0')")
    assert Node.objects.get().address == "127.0.9.1"
    page.click("button:has-text('Log out')")

    log_in("bob")
    page.click("text=Open incident")
    page.fill("input[name=title]", "run 12 stuck at step 14200")
    page.select_option("select[name=cluster]", label="gpt-train")
    page.select_option("select[name=severity]", "SEV1")
    page.click("button:has-text('Open incident')")
    page.wait_for_selector("#incident-status:has-text('Open')")

    for label, shown in [
        ("Mark investigating", "Investigating"),
        ("Mark mitigated", "Mitigated"),
        ("Mark resolved", "Resolved"),
        ("Mark closed", "Closed"),
    ]:
        page.click(f"button:has-text('{label}')")
        page.wait_for_selector(f"#incident-status:has-text('{shown}')")

    timeline = page.locator("ol.timeline").inner_text()
    for step in [
        "Opened as SEV1",
        "Open → Investigating",
        "Mitigated → Resolved",
        "Resolved → Closed",
    ]:
        assert step in timeline
    assert timeline.count("bob") == 5
    assert Incident.objects.get().status == "closed"
    page.screenshot(path=str(live_server_screenshot_path()), full_page=True)


def live_server_screenshot_path():
    from django.conf import settings

    path = settings.VAR_DIR / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path / "incident-closed.png"
