"""Done when (issue 11): no input bundle makes `diagnose --bundle` exceed 30 s or 1 GiB, or
print a traceback.

Each hostile bundle (tests.hostile.hostile_bundles: pickle bombs, tar header bombs, nesting,
wrong types, degenerate lines at the size limits, huge world sizes, the member limit) is given
to `manage.py diagnose --bundle` in a fresh process under RLIMIT_AS 1 GiB and RLIMIT_CPU 30 s.
It must end with status 0 and one diagnosis line, or status 1 and one line saying why the
bundle was refused; never a traceback, never killed by a limit.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from django.conf import settings

from tests import hostile
from tests.snapshots.test_diagnose_offline import NO_SERVICES

CLASSES = ("A", "B", "C", "straggler", "init", "healthy", "unknown")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict:
    return hostile.hostile_bundles(tmp_path_factory.mktemp("hostile"))


def _diagnose(path, var) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **NO_SERVICES,
        "DJANGO_SETTINGS_MODULE": "console.settings.dev",
        "DJANGO_SECRET_KEY": "test-only-not-secret",
        "HANGDESK_VAR_DIR": str(var),
    }
    return hostile.run_limited_command(
        ["manage.py", "diagnose", "--bundle", str(path)], env=env, cwd=settings.BASE_DIR
    )


@pytest.mark.slow
def test_no_hostile_bundle_breaks_diagnose(bundles, tmp_path):
    outcomes = {}
    for name, path in bundles.items():
        done = _diagnose(path, tmp_path / "var")
        outcomes[name] = (done.returncode, done.stdout.strip(), done.stderr.strip()[-600:])
    broken = {name: outcome for name, outcome in outcomes.items() if not _clean(*outcome)}
    assert broken == {}
    refused = {name for name, (status, _, _) in outcomes.items() if status == 1}
    assert {"tar-gnu-long-name", "tar-pax-header", "tar-zeros-1-gib", "manifest-deep"} <= refused
    assert {"tar-non-utf8-name"} <= refused


def _clean(status: int, stdout: str, stderr: str) -> bool:
    if "Traceback" in stdout + stderr:
        return False
    if status == 0:
        return len(stdout.splitlines()) == 1 and stdout.split(":", 1)[0] in CLASSES
    return (
        status == 1 and stderr.startswith("CommandError: bundle refused: ") and "\n" not in stderr
    )
