"""`make run` as a newcomer gets it: no DATABASE_URL, no REDIS_URL, one command."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from tests.helpers import child_pids, free_port, wait_for

pytestmark = pytest.mark.worker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_runconsole_serves_the_login_page_runs_tasks_on_the_file_broker_and_stops_cleanly(
    tmp_path,
):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")
    }
    var = tmp_path / "var"  # not there yet: runconsole makes it, the settings do not
    env.update(HANGDESK_VAR_DIR=str(var), HANGDESK_DEMO="0", HANGDESK_PORT=str(port))
    env["DJANGO_SETTINGS_MODULE"] = "console.settings.dev"  # as `make run` names them
    console = subprocess.Popen(
        [sys.executable, "manage.py", "runconsole"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def login_page() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as page:
                    return page.status == 200 and b"Log in to hangdesk" in page.read()
            except OSError:
                return False

        wait_for(login_page, timeout=60, interval=0.5, what="the login page")

        def heartbeat() -> bool:
            # beat -> filesystem broker -> worker -> SQLite: the embedded mode end to end.
            with sqlite3.connect(var / "hangdesk.sqlite3", timeout=5) as db:
                return bool(
                    db.execute("SELECT count(*) FROM console_workerheartbeat").fetchone()[0]
                )

        wait_for(
            heartbeat, timeout=90, interval=1, what="a worker heartbeat through the file broker"
        )
        children = child_pids(console.pid)
        # web, beat, and every worker of the settings (ssh, analysis, early, ahead)
        assert len(children) == len(settings.HANGDESK_WORKERS) + 2
    finally:
        console.send_signal(signal.SIGINT)
        output, _ = console.communicate(timeout=60)
    assert console.returncode == 0, output
    assert "first admin created: user admin, password" in output
    assert "broker:   filesystem broker in" in output
    assert "stopped." in output
    # Made by runconsole at run time (never by the settings): the key the children share.
    assert (var / "secret-key").stat().st_mode & 0o777 == 0o600
    wait_for(lambda: not any(_alive(pid) for pid in children), timeout=10, what="children gone")
