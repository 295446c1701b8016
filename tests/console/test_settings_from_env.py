import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import ConnectionHandler

from console.settings import base
from core.celery import make_file_broker_folders


def test_it_uses_postgres_when_database_url_is_set(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hangdesk")
    config = base.database_from_env()
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "hangdesk"


def test_it_falls_back_to_sqlite_without_database_url(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(base, "VAR_DIR", tmp_path / "var")
    config = base.database_from_env()
    assert config["ENGINE"] == "console.sqlite3"
    assert config["NAME"] == tmp_path / "var" / "hangdesk.sqlite3"
    assert not (tmp_path / "var").exists()  # made by the first connection, not by settings


def test_the_sqlite_backend_makes_the_folder_when_it_first_connects(tmp_path, django_db_blocker):
    path = tmp_path / "var" / "deeper" / "hangdesk.sqlite3"
    connections = ConnectionHandler({"default": {"ENGINE": "console.sqlite3", "NAME": path}})
    connection = connections["default"]
    try:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("CREATE TABLE t (x integer)")
    finally:
        connection.close()
    assert path.is_file()


def test_it_refuses_a_database_url_it_cannot_use(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "nosuchdb://somewhere/x")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        base.database_from_env()


def test_it_uses_a_serverless_broker_without_redis_url(monkeypatch, tmp_path):
    monkeypatch.setattr(base, "REDIS_URL", "")
    monkeypatch.setattr(base, "BROKER_DIR", tmp_path / "broker")
    url, options = base.broker_from_env()
    assert url == "filesystem://"
    assert options["data_folder_in"] == str(tmp_path / "broker")
    assert not (tmp_path / "broker").exists()  # the Celery app makes it, when first used


def test_the_celery_app_makes_the_file_brokers_folders_when_configured(tmp_path):
    folder = tmp_path / "broker"
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    options["control_folder"] = str(folder / "control")
    source = SimpleNamespace(
        broker_url="filesystem://", broker_transport_options=options, result_backend=None
    )
    make_file_broker_folders(sender=None, source=source)
    assert (folder / "control").is_dir()


def test_the_celery_app_makes_no_folder_for_redis(tmp_path):
    options = {"data_folder_in": str(tmp_path / "broker")}
    source = SimpleNamespace(
        broker_url="redis://127.0.0.1:6379/0", broker_transport_options=options, result_backend=None
    )
    make_file_broker_folders(sender=None, source=source)
    assert not (tmp_path / "broker").exists()


def test_it_refuses_a_redis_url_that_is_not_redis(monkeypatch):
    monkeypatch.setattr(base, "REDIS_URL", "http://127.0.0.1:6379")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        base.broker_from_env()


def test_it_refuses_a_boolean_it_cannot_read(monkeypatch):
    monkeypatch.setenv("DJANGO_DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DJANGO_DEBUG"):
        base.env_bool("DJANGO_DEBUG", False)


def test_it_refuses_a_whole_number_it_cannot_read_naming_the_variable(monkeypatch):
    name = "HANGDESK_LOGIN_FAILURE_LIMIT"
    for raw in ("five", "2.5", "-1", "0", "1001"):
        monkeypatch.setenv(name, raw)
        with pytest.raises(ImproperlyConfigured, match=rf"{name}=.* whole number \(1-1000\)"):
            base.env_int(name, 5, low=1, high=1000)
    monkeypatch.setenv(name, " 12 ")
    assert base.env_int(name, 5, low=1, high=1000) == 12
    monkeypatch.setenv(name, "")
    assert base.env_int(name, 5, low=1, high=1000) == 5


# Imported in a fresh interpreter that records, through audit hooks, every directory made,
# socket connected, environment variable set and file opened for writing.
IMPORT_EVERY_SETTINGS_MODULE = """
import importlib, os, sys
seen = []
WATCHED = {"os.mkdir", "socket.connect", "socket.bind", "os.putenv", "os.unsetenv"}
def hook(event, args):
    if event in WATCHED or (event == "open" and isinstance(args[1], str) and "r" not in args[1]):
        seen.append((event, repr(args)[:200]))
    if event == "open" and args[1] is None and args[2] & (os.O_WRONLY | os.O_RDWR):
        seen.append((event, repr(args)[:200]))
sys.addaudithook(hook)
for name in sys.argv[1:]:
    importlib.import_module(name)
print(seen)
"""


@pytest.mark.parametrize(
    ("modules", "secret_key"),
    [(["console.settings.dev", "console.settings.test"], None), (["console.settings.prod"], "k")],
)
def test_importing_the_settings_makes_no_folder_opens_no_socket_and_sets_no_variable(
    tmp_path, modules, secret_key
):
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY")
    }
    env.update(HANGDESK_VAR_DIR=str(tmp_path / "var"))
    if secret_key:
        env["DJANGO_SECRET_KEY"] = secret_key * 50
        env["DJANGO_ALLOWED_HOSTS"] = "console.example"
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_SETTINGS_MODULE, *modules],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    assert not (tmp_path / "var").exists()


def test_the_dev_secret_key_is_read_from_var_never_written_by_the_settings(monkeypatch, tmp_path):
    from console.settings import dev

    monkeypatch.setattr(dev, "DEV_SECRET_KEY_FILE", tmp_path / "secret-key")
    first, second = dev._dev_secret_key(), dev._dev_secret_key()
    assert len(first) > 40 and first != second  # one of this process, nothing stored
    assert not (tmp_path / "secret-key").exists()
    (tmp_path / "secret-key").write_text("kept-across-restarts\n")
    assert dev._dev_secret_key() == "kept-across-restarts"
