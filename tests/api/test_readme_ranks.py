"""The README's lines that read a large job's per-rank table through the API, a page at a time
(`next` to the end), run as written against a live server."""

from __future__ import annotations

import json
import subprocess

import pytest

from core.services import api_token_create
from incidents.services import incident_open
from tests.clikit import readme_block
from tests.pages.fleet import fleet_diagnosis, fleet_snapshot

pytestmark = pytest.mark.django_db(transaction=True)

WORLD, SUSPECT, MISSING = 2_500, 2_207, 1_733  # three pages of 1,000


def test_the_readme_reads_every_rank_page_by_page(live_server, bob, carol, cluster, tmp_path):
    incident = incident_open(opened_by=bob, title="fleet hang", cluster=cluster)
    diagnosis = fleet_diagnosis(WORLD, suspect=SUSPECT, missing=MISSING)
    snapshot = fleet_snapshot(incident, cluster, diagnosis)
    _, token = api_token_create(user=carol, name="script")  # a viewer reads verdicts too
    script = "\n".join(readme_block("tests/api/test_readme_ranks.py"))
    env = {"PATH": "/usr/bin:/bin", "HANGDESK_URL": live_server.url, "HANGDESK_TOKEN": token}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env={**env, "SNAPSHOT": str(snapshot.pk)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [SUSPECT]
    rows = [json.loads(line) for line in (tmp_path / "ranks.jsonl").read_text().splitlines()]
    assert [r["rank"] for r in rows] == list(range(WORLD))
    assert rows[MISSING]["status"] == "missing" and rows[SUSPECT]["node"] == "node-0275"
