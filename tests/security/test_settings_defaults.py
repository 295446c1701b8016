"""manage.py, WSGI and Celery no longer fall back to the dev settings (DEBUG on) when nothing
names a settings module: they load the production ones, which refuse to start without a
secret key and host names; with those, `check --deploy` has nothing to say (issue 11)."""

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

PRINT_SETTINGS = """
import os, sys
import django
module = sys.argv[1]
__import__(module)  # its default settings module, as a server would load it
from django.conf import settings
print(os.environ["DJANGO_SETTINGS_MODULE"], settings.DEBUG, settings.SECURE_SSL_REDIRECT,
      getattr(settings, "SECURE_PROXY_SSL_HEADER", None))
"""


def _env(tmp_path, **changes: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("DJANGO_") and key not in ("DATABASE_URL", "REDIS_URL")
    }
    env["HANGDESK_VAR_DIR"] = str(tmp_path / "var")
    env.update(changes)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _production_env(tmp_path, **changes: str) -> dict[str, str]:
    return _env(
        tmp_path,
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="hangdesk.example",
        **changes,
    )


def test_manage_py_without_settings_refuses_to_start_without_a_secret_key(tmp_path):
    done = _run(["manage.py", "check"], _env(tmp_path))
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY must be set in production" in done.stderr
    assert "console.settings.dev" in done.stderr  # and says how to run the dev console


def test_production_settings_want_the_host_names_too(tmp_path):
    env = _env(tmp_path, DJANGO_SECRET_KEY=secrets.token_urlsafe(50))
    done = _run(["manage.py", "check"], env)
    assert done.returncode != 0
    assert "DJANGO_ALLOWED_HOSTS must name" in done.stderr


@pytest.mark.parametrize("module", ["console.wsgi", "console.celery"])
def test_wsgi_and_celery_default_to_the_production_settings(tmp_path, module):
    done = _run(["-c", PRINT_SETTINGS, module], _production_env(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["console.settings.prod", "False", "True", "None"]


def test_check_deploy_finds_nothing_with_the_documented_environment(tmp_path):
    done = _run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], _production_env(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no issues" in done.stdout


def test_behind_a_tls_proxy_the_forwarded_scheme_is_trusted_when_asked(tmp_path):
    env = _production_env(tmp_path, DJANGO_SECURE_PROXY_SSL_HEADER="true")
    done = _run(["-c", PRINT_SETTINGS, "console.wsgi"], env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "('HTTP_X_FORWARDED_PROTO', 'https')" in done.stdout
