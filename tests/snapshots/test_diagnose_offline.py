"""`manage.py diagnose --bundle` as an SRE runs it on a laptop: a fresh process, no database,
no broker, and a start-up that loads neither Celery nor paramiko (docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

import analysis
from collectors.bundles import write_bundle
from tests.analysis.sample_evidence import load_snapshot

# Nothing listens on port 1: any attempt to reach a database or a broker would fail loudly.
NO_SERVICES = {
    "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nothing",
    "REDIS_URL": "redis://127.0.0.1:1/0",
}


def _run_diagnose(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    bundle = tmp_path / "outside.tar.gz"
    bundle.write_bytes(write_bundle(load_snapshot("outside")))
    env = {
        **os.environ,
        **NO_SERVICES,
        "DJANGO_SETTINGS_MODULE": "console.settings.dev",
        "DJANGO_SECRET_KEY": "test-only-not-secret",
        "HANGDESK_VAR_DIR": str(tmp_path / "var"),
    }
    return subprocess.run(
        [sys.executable, *extra, "manage.py", "diagnose", "--bundle", str(bundle)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _expected_line() -> str:
    diagnosis = analysis.diagnose(load_snapshot("outside"))
    if hasattr(diagnosis, "to_json"):
        diagnosis = diagnosis.to_json()
    return f"{diagnosis['classification']}: {diagnosis['summary']}"


def test_diagnose_bundle_needs_no_database_and_loads_no_celery_or_paramiko(tmp_path):
    done = _run_diagnose(tmp_path, "-X", "importtime")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == _expected_line()
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "django.db.models" in imported  # the importtime listing was read
    heavy = sorted(m for m in imported if m.split(".")[0] in {"celery", "kombu", "paramiko"})
    assert heavy == []
    # No system checks: they would import the URLconf, and with it every view and the API.
    assert "console.urls" not in imported
    assert "drf_spectacular.views" not in imported


def test_the_celery_app_is_configured_for_every_task_module():
    import console
    from collectors.tasks import analyse_snapshot
    from core.tasks import record_worker_heartbeat

    assert console.celery_app.main == "hangdesk"
    assert analyse_snapshot.app is console.celery_app
    assert record_worker_heartbeat.app is console.celery_app
    assert console.celery_app.conf.task_routes == settings.CELERY_TASK_ROUTES
