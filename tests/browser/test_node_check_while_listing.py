"""A "test connection" asked while the node list keeps itself fresh (another node's check
runs in the background): the answer reaches its row and stays there. The list used to
replace itself whole every 2 s, the answer's slot with it, so a slow node's answer landed in
a slot no longer on the page (and a fast one was wiped by the next refresh)."""

from __future__ import annotations

import socket
import subprocess

import pytest

from clusters.models import Node, NodeCheck
from clusters.services import cluster_create

pytestmark = [
    pytest.mark.worker,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def _public_key(path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


@pytest.fixture
def silent_port():
    """A loopback port whose kernel accepts the connection and nobody ever speaks SSH on:
    the worker's check waits there until its banner timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield listener.getsockname()[1]
    listener.close()


def test_an_answer_asked_while_another_check_runs_reaches_its_row_and_stays(
    celery_worker_process, page, live_server, log_in, alice, tmp_path, silent_port
):
    key = tmp_path / "id_ed25519"
    host_key = _public_key(key)
    cluster = cluster_create(name="polling", description="", expected_world_size=8)
    fields = {"address": "127.0.0.1", "username": "root", "key_path": str(key)}
    # Checked "in the background" by nobody: the list keeps asking until the test answers.
    checked = Node.objects.create(
        cluster=cluster,
        name="being-checked",
        port=1,
        host_key=host_key,
        check_state=NodeCheck.CHECKING,
        **fields,
    )
    silent = Node.objects.create(
        cluster=cluster, name="silent", port=silent_port, host_key=host_key, **fields
    )
    log_in("alice")
    page.goto(f"{live_server.url}{cluster.get_absolute_url()}")
    page.evaluate(
        "window.refreshes = 0;"
        "document.body.addEventListener('htmx:afterRequest', (event) => {"
        "  if (event.detail.requestConfig.verb === 'get') window.refreshes++ })"
    )

    page.click(f"form[action$='/nodes/{silent.pk}/test/'] button")
    # The worker gives up on the silent node after its connect budget (10 s by default),
    # while the list refreshes a few times.
    page.wait_for_selector(f"#node-check-{silent.pk} .flash", timeout=90_000)
    said = page.inner_text(f"#node-check-{silent.pk}")
    assert said.startswith("silent: "), said
    assert page.evaluate("window.refreshes") >= 2  # the list did refresh meanwhile

    # And it survives the refreshes after it.
    seen = page.evaluate("window.refreshes")
    page.wait_for_function("(n) => window.refreshes >= n", arg=seen + 2, timeout=30_000)
    assert page.inner_text(f"#node-check-{silent.pk}") == said
    # The test's own answer is in its row's state, from the refresh.
    assert "fails" in page.inner_text(f"#node-state-{silent.pk}"), said

    # The background check answers: its row says so, and the list stops asking.
    Node.objects.filter(pk=checked.pk).update(check_state=NodeCheck.OK, check_text="fine")
    page.wait_for_selector(f"#node-state-{checked.pk}.ok", timeout=30_000)
    assert page.inner_text(f"#node-state-{checked.pk}").startswith("connects")
    page.wait_for_selector("#node-poll:not([hx-trigger])", state="attached", timeout=30_000)
    assert page.inner_text(f"#node-check-{silent.pk}") == said
