"""Nodes checked before a snapshot needs them, on a real lab: "test connection" runs the
collector's SSH handshake on a worker, the node form refuses a key file the worker does not
have, removal asks first, and a snapshot with a failed node says partial."""

from __future__ import annotations

import pytest

from clusters.importing import cluster_import
from clusters.models import Node
from collectors.models import Snapshot
from incidents.services import incident_open

pytestmark = [
    pytest.mark.lab,
    pytest.mark.worker,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture(scope="module")
def lab(hung_rank_exit_lab):
    return hung_rank_exit_lab  # the session's: this module only observes it


def test_test_connection_on_a_good_and_a_bad_node_then_a_partial_snapshot(
    lab, celery_worker_process, page, live_server, log_in, alice
):
    cluster = cluster_import(lab.info).cluster
    good = cluster.nodes.order_by("name").first()
    # The same machine with a key the worker does not have (a key removed after the fact).
    bad = Node.objects.create(
        cluster=cluster,
        name="lab-node-9",
        address=good.address,
        port=good.port,
        username=good.username,
        key_path="/nonexistent/hangdesk/id_ed25519",
        host_key=good.host_key,
    )
    log_in("alice")
    page.goto(f"{live_server.url}{cluster.get_absolute_url()}")

    page.click(f"form[action$='/nodes/{good.pk}/test/'] button")
    page.wait_for_selector(f"#node-check-{good.pk} .flash", timeout=60_000)
    said = page.inner_text(f"#node-check-{good.pk}")
    assert page.locator(f"#node-check-{good.pk} .flash.success").count() == 1, said
    assert said.startswith(f"{good.name}: connected to {good.address}:{good.port} as root")
    assert "host key SHA256:" in said and "login accepted" in said

    page.click(f"form[action$='/nodes/{bad.pk}/test/'] button")
    page.wait_for_selector(f"#node-check-{bad.pk} .flash", timeout=60_000)
    assert page.inner_text(f"#node-check-{bad.pk}").startswith(
        "lab-node-9: the key file /nonexistent/hangdesk/id_ed25519 does not exist on the "
        "worker (from "
    )

    # The form asks the worker too, before the node is saved.
    page.fill("input[name=name]", "lab-node-8")
    page.fill("input[name=address]", good.address)
    page.fill("input[name=key_path]", "/nonexistent/hangdesk/other_key")
    page.fill("textarea[name=host_key]", good.host_key)
    page.click("button:has-text('Add node')")
    page.wait_for_selector(".has-error:has-text('does not exist on the worker')", timeout=30_000)
    assert not Node.objects.filter(name="lab-node-8").exists()

    # Removal asks first; dismissing keeps the node.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click(f"form[action$='/nodes/{bad.pk}/delete/'] button")
    page.wait_for_timeout(300)
    assert Node.objects.filter(pk=bad.pk).exists()

    incident = incident_open(opened_by=alice, title="stuck", cluster=cluster, severity="SEV1")
    page.goto(f"{live_server.url}{incident.get_absolute_url()}")
    page.click("#snapshot-button")
    page.wait_for_selector("#snapshot-progress[data-status=done]", timeout=120_000)
    status = page.locator("#snapshot-progress .snap-status")
    assert status.inner_text() == "Partial · 1 of 3 nodes failed"
    assert "partial" in status.get_attribute("class")
    assert Snapshot.objects.get().status == "done"
    page.wait_for_selector("#diagnosis")  # the verdict arrives without a reload

    page.goto(f"{live_server.url}{cluster.get_absolute_url()}")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"form[action$='/nodes/{bad.pk}/delete/'] button")
    page.wait_for_selector("text=Node lab-node-9 removed.")
    assert not Node.objects.filter(pk=bad.pk).exists()
