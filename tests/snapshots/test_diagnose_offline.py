"""`manage.py diagnose --bundle` and `hangdesk diagnose` as an SRE runs them on a laptop: a
fresh process, no settings named, no secret, no database, no broker; `hangdesk` imports no
Django at all, and manage.py's start-up loads neither Celery nor paramiko (docs/performance.md)."""

from __future__ import annotations

import os
import subprocess
import sys

from django.conf import settings

import analysis
from analysis.diagnosis import Diagnosis
from analysis.secrets import mask_json
from collectors.bundles import write_bundle
from hangdesk import report
from tests.analysis.sample_evidence import load_snapshot

# Nothing listens on port 1: any attempt to reach a database or a broker would fail loudly.
NO_SERVICES = {
    "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nothing",
    "REDIS_URL": "redis://127.0.0.1:1/0",
}
# What a laptop has: none of the console's settings.
UNSET = ("DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS")


def _run(tmp_path, *command: str) -> subprocess.CompletedProcess:
    bundle = tmp_path / "outside.tar.gz"
    bundle.write_bytes(write_bundle(load_snapshot("outside")))
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(NO_SERVICES, HANGDESK_VAR_DIR=str(tmp_path / "var"))
    return subprocess.run(
        [sys.executable, *(str(bundle) if part == "BUNDLE" else part for part in command)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _expected_report() -> str:
    stored = mask_json(analysis.diagnose(load_snapshot("outside")).to_json())
    return report.text_report(Diagnosis.from_json(stored))


def _imported(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def test_manage_py_diagnose_bundle_needs_no_settings_database_or_celery(tmp_path):
    done = _run(tmp_path, "-X", "importtime", "manage.py", "diagnose", "--bundle", "BUNDLE")
    assert done.returncode == report.EXIT_STUCK, done.stderr[-2000:]
    assert done.stdout.rstrip("\n") == _expected_report()
    assert done.stdout.startswith("A · a rank left or stalled outside the collective")
    imported = _imported(done.stderr)
    assert "django.db.models" in imported  # the importtime listing was read
    heavy = sorted(m for m in imported if m.split(".")[0] in {"celery", "kombu", "paramiko"})
    assert heavy == []
    # No system checks: they would import the URLconf, and with it every view and the API.
    assert "console.urls" not in imported
    assert "drf_spectacular.views" not in imported


def test_hangdesk_diagnose_imports_no_django_and_prints_the_same(tmp_path):
    done = _run(tmp_path, "-X", "importtime", "-m", "hangdesk", "diagnose", "BUNDLE")
    assert done.returncode == report.EXIT_STUCK, done.stderr[-2000:]
    assert done.stdout.rstrip("\n") == _expected_report()
    imported = _imported(done.stderr)
    assert "analysis.diagnosis" in imported
    assert sorted(m for m in imported if m.split(".")[0] in {"django", "collectors", "core"}) == []


def test_manage_py_json_is_the_masked_diagnosis_in_reading_order(tmp_path):
    done = _run(tmp_path, "manage.py", "diagnose", "--bundle", "BUNDLE", "--json")
    assert done.returncode == report.EXIT_STUCK, done.stderr[-2000:]
    assert done.stdout.startswith('{\n  "classification": "A",\n  "summary": ')


def test_commands_that_need_production_settings_say_so_in_one_line(tmp_path):
    done = _run(tmp_path, "manage.py", "migrate")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("manage.py: DJANGO_SECRET_KEY must be set in production")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_help_needs_no_settings(tmp_path):
    said = {}
    for command in (("diagnose", "--help"), ("help",)):
        done = _run(tmp_path, "manage.py", *command)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "Traceback" not in done.stderr
        said[command[0]] = done.stdout
    assert "--bundle" in said["diagnose"]
    assert "snapshot" in said["help"]  # the console's own commands are listed


def test_the_celery_app_is_configured_for_every_task_module():
    import console
    from collectors.tasks import analyse_snapshot
    from core.tasks import record_worker_heartbeat

    assert console.celery_app.main == "hangdesk"
    assert analyse_snapshot.app is console.celery_app
    assert record_worker_heartbeat.app is console.celery_app
    assert console.celery_app.conf.task_routes == settings.CELERY_TASK_ROUTES
