"""The README's watchdog snippet, run as written against a live server."""

import re
from pathlib import Path

import pytest

from collectors.models import Snapshot
from core.services import api_token_create
from incidents.models import Incident

pytestmark = pytest.mark.django_db(transaction=True)

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_watchdog_opens_an_incident_and_a_snapshot(
    live_server, bob, cluster, monkeypatch, capsys
):
    snippet = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    _, secret = api_token_create(user=bob, name="watchdog")
    monkeypatch.setenv("HANGDESK_URL", live_server.url)
    monkeypatch.setenv("HANGDESK_TOKEN", secret)
    monkeypatch.setenv("HANGDESK_CLUSTER", cluster.name)
    monkeypatch.setenv("JOB_NAME", "gpt-70b")
    namespace: dict = {}
    exec(compile(snippet, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    namespace["raise_hang_incident"](14200)
    incident = Incident.objects.get()
    assert incident.title == "gpt-70b stuck after step 14200"
    snapshot = Snapshot.objects.get()
    assert capsys.readouterr().out.strip() == (
        f"hangdesk: {incident.reference} opened, snapshot {snapshot.pk}"
    )
