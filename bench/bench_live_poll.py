"""What one open incident tab costs the server: its live poll (every 3 s while visible).

Server time and queries of /incidents/N/live/ through Django's test client (session
middleware, login, the whole stack; no network), for an incident with a long timeline and an
analysed snapshot: unchanged (the common case: a 204 after one primary-key read) and changed
(a colleague's note: the timeline swapped in; a new verdict: the diagnosis region too).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hangdesk_bench_live \
        .venv/bin/python bench/bench_live_poll.py [--events 200] [--repeat 200]

The database is created if missing and its hangdesk tables are emptied first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.consolekit import console_settings  # noqa: E402 (the repo is on the path now)

console_settings(test_client=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()

    from bench.consolekit import console_database

    console_database()
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from clusters.services import cluster_create
    from collectors.services import snapshot_analyse
    from collectors.starts import snapshot_import_bundle
    from incidents.services import incident_add_note, incident_open
    from tests.analysis.sample_evidence import load_snapshot

    user = User.objects.create_superuser("bench", "", "bench-password-1")
    cluster = cluster_create(name="bench")
    incident = incident_open(opened_by=user, title="bench", cluster=cluster, severity="SEV1")
    snapshot = snapshot_import_bundle(incident=incident, evidence=load_snapshot("crash"))
    snapshot_analyse(snapshot_id=snapshot.pk)
    for i in range(args.events):
        incident_add_note(incident=incident, by=user, text=f"note {i}: what we saw")
    client = Client()
    client.force_login(user)
    page = client.get(incident.get_absolute_url())
    assert page.status_code == 200
    html = page.content.decode()
    start = html.index("hx-get=", html.index('id="live-poll"')) + len('hx-get="')
    url = html[start : html.index('"', start)].replace("&amp;", "&")

    def timed(path: str, expect: int) -> tuple[float, int, int]:
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(path, HTTP_HX_REQUEST="true")
            took = time.perf_counter() - started
        assert response.status_code == expect, (response.status_code, path)
        return took, len(queries), len(response.content)

    unchanged = [timed(url, 204) for _ in range(args.repeat)]
    stale = url.replace("version=", "version=0", 1)  # an older version: the timeline comes back
    changed = [timed(stale, 200) for _ in range(max(5, args.repeat // 10))]
    new_verdict = stale.replace("&verdict=", "&verdict=0", 1)
    verdict = [timed(new_verdict, 200) for _ in range(max(5, args.repeat // 10))]
    for name, runs in (
        ("unchanged (204)", unchanged),
        ("changed: timeline", changed),
        ("changed: timeline + verdict", verdict),
    ):
        times = [t for t, _, _ in runs]
        print(
            f"{name:28} median {statistics.median(times) * 1000:6.2f} ms  "
            f"best {min(times) * 1000:6.2f} ms  queries {runs[0][1]}  bytes {runs[0][2]:,}"
        )
    per_tab = statistics.median([t for t, _, _ in unchanged]) / 3.0
    print(f"one idle open tab: {per_tab * 100:.3f}% of one core (a poll every 3 s)")


if __name__ == "__main__":
    main()
