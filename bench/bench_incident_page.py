"""Server time and HTML size of the incident page for a 4,096-rank (or 32,000-rank) snapshot,
and of storing its analysis.

Builds the same replicated evidence as bench_analysis.py (real captured stacks, environments,
logs and flight-recorder dumps), imports it into an incident as a snapshot, analyses it the
way the worker does (the diagnosis, its per-rank table inside), then renders the incident
page with Django's test client — the server's whole time, templates included, no network.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hangdesk_bench \
        .venv/bin/python bench/bench_incident_page.py [--ranks 4096] [--nodes 512] [--repeat 5]
        [--reuse]

At 32,000 ranks (`--ranks 32000 --nodes 4000`) storing and analysing the snapshot takes
minutes on this machine; `--reuse` keeps the database of an earlier run with the same ranks
and only renders the pages (each page's server time, bytes and queries; the per-rank table's
pages too).

`--views` also times every other view that reads the snapshot's diagnosis (each with its
server time and CPU, queries and bytes): the live poll, a rank's page (the suspect, and a
rank no overview row holds), the environment page, the evidence viewer (an artifact, a
quoted line), the post-mortem's first draft, the API's snapshot, diagnosis and per-rank
pages, and a published post-mortem's share, print and Markdown pages (on a second incident
whose snapshot holds the same diagnosis: publishing needs it resolved).

Without DATABASE_URL it uses a throw-away SQLite file. The database is created if missing and
its hangdesk tables are emptied first.
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
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--nodes", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="render the last run's snapshot")
    parser.add_argument("--views", action="store_true", help="and every view that reads it")
    args = parser.parse_args()

    from bench.consolekit import console_database

    console_database(flush=not args.reuse)
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from bench.bench_analysis import build_snapshot
    from clusters.services import cluster_create
    from collectors.models import Snapshot
    from collectors.services import snapshot_analyse
    from collectors.starts import snapshot_import_bundle
    from incidents.services import incident_open

    reused = None
    if args.reuse:
        reused = (
            Snapshot.objects.filter(
                cluster__name="bench",
                cluster__expected_world_size=args.ranks,
                diagnosis__isnull=False,
            )
            .select_related("incident")
            .last()
        )
    if reused is not None:
        snapshot, incident = reused, reused.incident
        user = User.objects.get(username="bench")
        print(f"database: {connection.vendor}; ranks {args.ranks}: snapshot {snapshot.pk} reused")
    else:
        user = User.objects.create_superuser("bench", "", "bench-password-1")
        cluster = cluster_create(name="bench", expected_world_size=args.ranks)
        incident = incident_open(opened_by=user, title="bench", cluster=cluster, severity="SEV1")
        evidence = build_snapshot(args.ranks, args.nodes, stuck_rank=args.ranks // 2 + 7)

        started = time.perf_counter()
        snapshot = snapshot_import_bundle(incident=incident, evidence=evidence, by=user)
        stored = time.perf_counter()
        snapshot_analyse(snapshot_id=snapshot.pk)
        analysed = time.perf_counter()
        snapshot.refresh_from_db()
        print(f"database: {connection.vendor}; ranks {args.ranks}, nodes {args.nodes}")
        print(f"store evidence (import): {stored - started:.2f} s")
        rows = len(snapshot.whole_diagnosis()["per_rank"])
        print(
            f"analyse + store the diagnosis ({rows} per-rank rows inside): "
            f"{analysed - stored:.2f} s  -> {snapshot.diagnosis['classification']}"
        )

    client = Client()
    client.force_login(user)
    url = incident.get_absolute_url()
    client.get(url)  # warm template and connection caches

    def timed(label: str, page_url: str, expect: int = 200, cl=None, post=None) -> None:
        times, cpu, queries, size = [], [], 0, 0
        for _ in range(args.repeat):
            with CaptureQueriesContext(connection) as captured:
                start, start_cpu = time.perf_counter(), time.process_time()
                asked = cl or client
                response = asked.post(page_url, post) if post else asked.get(page_url)
                times.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            assert response.status_code == expect, (response.status_code, page_url)
            queries, size = len(captured), len(response.content)
        load = Path("/proc/loadavg").read_text().split()[0]
        print(
            f"{label}: median {statistics.median(times):.3f} s, best {min(times):.3f} s "
            f"(CPU median {statistics.median(cpu):.3f} s) over {args.repeat}; {queries} "
            f"queries; {size / 1024:.0f} KiB; load {load}"
        )

    timed("incident page", url)
    timed("snapshot page", f"/snapshots/{snapshot.pk}/")
    timed("snapshot page, one node's artifacts", f"/snapshots/{snapshot.pk}/?node=node-007")
    for label, page_url in _more_pages(snapshot):
        timed(label, page_url)
    if args.views:
        from bench.bench_views import time_views

        time_views(timed, client, snapshot, user)


def _more_pages(snapshot) -> list[tuple[str, str]]:
    """Pages that exist only in some trees (kept apart so the bench runs on older ones)."""
    from django.urls import NoReverseMatch, reverse

    try:
        ranks = reverse("collectors:ranks", args=[snapshot.pk])
    except NoReverseMatch:
        return []
    return [
        ("per-rank table, page 2", f"{ranks}?page=2"),
        ("per-rank table, last page", f"{ranks}?page=last"),
    ]


if __name__ == "__main__":
    main()
