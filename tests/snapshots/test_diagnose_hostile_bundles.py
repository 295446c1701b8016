"""Done when (issue 11): no input bundle makes `diagnose --bundle` exceed 30 s or 1 GiB, or
print a traceback.

Each hostile bundle (tests.hostile.hostile_bundles: pickle bombs, tar header bombs, nesting,
wrong types, degenerate lines at the size limits, huge world sizes, the member limit) is given
to `hangdesk diagnose` (the reader and the analysis `manage.py diagnose --bundle` runs too) in
a fresh process under RLIMIT_AS 1 GiB and RLIMIT_CPU 30 s. It must end with a verdict (status
0, 1 or 3, the report's first line naming the class), or status 2 and one line saying why the
bundle was refused; never a traceback, never killed by a limit.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from django.conf import settings

from hangdesk import report
from readings.classes import CLASSES
from tests import hostile
from tests.snapshots.test_diagnose_offline import NO_SERVICES

VERDICT_STATUSES = (report.EXIT_MOVING, report.EXIT_STUCK, report.EXIT_UNDECIDED)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict:
    return hostile.hostile_bundles(tmp_path_factory.mktemp("hostile"))


def _diagnose(path, var) -> subprocess.CompletedProcess:
    env = {**os.environ, **NO_SERVICES, "HANGDESK_VAR_DIR": str(var)}
    return hostile.run_limited_command(
        ["-m", "hangdesk", "diagnose", str(path)], env=env, cwd=settings.BASE_DIR
    )


@pytest.mark.slow
def test_no_hostile_bundle_breaks_diagnose(bundles, tmp_path):
    outcomes = {}
    for name, path in bundles.items():
        done = _diagnose(path, tmp_path / "var")
        outcomes[name] = (done.returncode, done.stdout.strip(), done.stderr.strip()[-600:])
    broken = {name: outcome for name, outcome in outcomes.items() if not _clean(*outcome)}
    assert broken == {}
    refused = {name for name, (status, _, _) in outcomes.items() if status == report.EXIT_USAGE}
    assert {"tar-gnu-long-name", "tar-pax-header", "tar-zeros-1-gib", "manifest-deep"} <= refused
    assert {"tar-non-utf8-name"} <= refused


def _clean(status: int, stdout: str, stderr: str) -> bool:
    if "Traceback" in stdout + stderr:
        return False
    if status in VERDICT_STATUSES:
        first = stdout.splitlines()[0] if stdout else ""
        return any(first.startswith(c.name + "  (confidence ") for c in CLASSES.values())
    return (
        status == report.EXIT_USAGE
        and stderr.startswith("hangdesk diagnose: bundle refused: ")
        and "\n" not in stderr
    )
