"""scripts/system-packages, which `make test` and `make run` call first, on a machine without
sshd or chromium. The machine is this one, seen from a private mount namespace where those
binaries are covered by an empty, non-executable file; `apt-get` and `id` are stubs on PATH.
Nothing outside the namespace changes, so other runs on this machine are not disturbed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

SSHD = "/usr/sbin/sshd"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# Records its arguments; with APT_INSTALLS=1, `install` uncovers the hidden binaries, as
# installing their packages would.
APT_GET = """#!/bin/sh
echo "$*" >>"$APT_LOG"
if [ "$1" = install ] && [ "$APT_INSTALLS" = 1 ]; then
    for path in $HIDDEN; do umount "$path"; done
fi
"""
# `id -u` answers $FAKE_UID; anything else goes to the real id.
ID = """#!/bin/sh
if [ "$1" = -u ]; then echo "$FAKE_UID"; else exec /usr/bin/id "$@"; fi
"""
HIDE_THEN_RUN = 'for path in $HIDDEN; do mount --bind "$EMPTY" "$path"; done; exec "$@"'


@pytest.fixture(scope="module", autouse=True)
def _needs_root_and_namespaces():
    missing = [tool for tool in ("unshare", "mount") if not shutil.which(tool)]
    missing += [path for path in (SSHD, CHROMIUM) if not os.path.exists(path)]
    if os.geteuid() != 0:
        missing.append("root (a private mount namespace to hide binaries in)")
    if missing:
        reason = "hiding binaries from the script needs: " + ", ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def _run(tmp_path: Path, profile: str, *, hidden=(), installs=False, uid=0, cwd=None, **extra):
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name, text in (("apt-get", APT_GET), ("id", ID)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    empty = tmp_path / "empty"
    empty.write_text("")
    empty.chmod(0o644)
    log = tmp_path / "apt.log"
    env = {
        "PATH": f"{stubs}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "APT_LOG": str(log),
        "APT_INSTALLS": "1" if installs else "0",
        "FAKE_UID": str(uid),
        "HIDDEN": " ".join(hidden),
        "EMPTY": str(empty),
        **extra,
    }
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", HIDE_THEN_RUN, "sh",
         str(settings.BASE_DIR / "scripts" / "system-packages"), profile],
        cwd=cwd or settings.BASE_DIR, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    calls = log.read_text().splitlines() if log.exists() else []
    return done, calls


def test_nothing_is_installed_when_everything_is_there(tmp_path):
    done, calls = _run(tmp_path, "test")
    assert done.returncode == 0, done.stderr
    assert "all present" in done.stdout
    assert calls == []


def test_as_root_it_installs_openssh_server_and_chromium_when_they_are_missing(tmp_path):
    done, calls = _run(tmp_path, "test", hidden=(SSHD, CHROMIUM), installs=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls == [
        "update -qq",
        "install -y -qq --no-install-recommends openssh-server chromium",
    ]
    assert "openssh-server: /usr/sbin/sshd, for the lab's nodes run sshd" in done.stdout
    assert "installed" in done.stdout.splitlines()[-1]


def test_it_fails_when_apt_get_did_not_bring_them(tmp_path):
    done, calls = _run(tmp_path, "test", hidden=(SSHD, CHROMIUM), installs=False)
    assert done.returncode == 1
    assert len(calls) == 2
    assert "still missing after apt-get install: openssh-server chromium" in done.stderr


def test_without_root_it_asks_for_the_command_and_stops_the_suite(tmp_path):
    done, calls = _run(tmp_path, "test", hidden=(CHROMIUM,), uid=1000)
    assert done.returncode == 1
    assert calls == []
    assert "sudo apt-get install --no-install-recommends chromium" in done.stderr


def test_make_run_needs_no_chromium_and_starts_without_sshd(tmp_path):
    done, calls = _run(tmp_path, "run", hidden=(SSHD, CHROMIUM), uid=1000)
    assert done.returncode == 0  # the console starts; only the demo lab would miss sshd
    assert calls == []
    assert "sudo apt-get install --no-install-recommends openssh-server" in done.stdout
    assert "chromium" not in done.stdout


def test_before_the_virtualenv_exists_it_asks_for_python3_venv_when_venv_cannot_run(tmp_path):
    # A checkout without .venv, and a python whose venv module is missing (Debian's python3
    # without python3-venv): `make` could not create the virtualenv.
    no_venv = tmp_path / "python-without-venv"
    no_venv.write_text("#!/bin/sh\nexit 1\n")
    no_venv.chmod(0o755)
    done, calls = _run(tmp_path, "test", uid=1000, cwd=tmp_path, PYTHON=str(no_venv))
    assert done.returncode == 1
    assert calls == []
    assert "sudo apt-get install --no-install-recommends python3-venv" in done.stderr
