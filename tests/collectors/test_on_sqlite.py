"""`make run`'s default database is SQLite; the suite runs on PostgreSQL. The modules here
hold queries beyond plain filters (aggregates with filters, a median, leases taken by a
conditional UPDATE), so they run again, whole, on a SQLite file of their own: a query only
PostgreSQL takes fails here, not on an SRE's first `make run` (the first verdict's deadline
check did: `percentile_cont ... WITHIN GROUP`, `= ANY(%s)`)."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

ON_SQLITE = (
    "tests/collectors/test_provisional_deadline.py",
    "tests/collectors/test_read_ahead.py",
    "tests/collectors/test_rank_chunks.py",
)


def test_the_deadline_and_lease_queries_run_on_sqlite(tmp_path):
    (tmp_path / "var").mkdir()  # the suite's SQLite test database is made there
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(
        CI="false",  # CI refuses the fallback for the suite; this run asks for it
        DATABASE_URL=f"sqlite:///{tmp_path / 'hangdesk.sqlite3'}",
        HANGDESK_VAR_DIR=str(tmp_path / "var"),
        PYTEST_ADDOPTS=f"--basetemp={tmp_path / 'pytest'}",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *ON_SQLITE],
        cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "database: SQLite" in done.stdout
    assert " passed" in done.stdout and " failed" not in done.stdout
