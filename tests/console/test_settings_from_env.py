import pytest
from django.core.exceptions import ImproperlyConfigured

from console.settings import base


def test_it_uses_postgres_when_database_url_is_set(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/hangdesk")
    config = base.database_from_env()
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "hangdesk"


def test_it_falls_back_to_sqlite_without_database_url(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(base, "VAR_DIR", tmp_path)
    config = base.database_from_env()
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == tmp_path / "hangdesk.sqlite3"


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
    assert (tmp_path / "broker").is_dir()


def test_it_refuses_a_redis_url_that_is_not_redis(monkeypatch):
    monkeypatch.setattr(base, "REDIS_URL", "http://127.0.0.1:6379")
    with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
        base.broker_from_env()


def test_it_refuses_a_boolean_it_cannot_read(monkeypatch):
    monkeypatch.setenv("DJANGO_DEBUG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="DJANGO_DEBUG"):
        base.env_bool("DJANGO_DEBUG", False)


def test_the_suite_runs_on_the_services_it_announced(settings):
    # The banner at the top of the run must tell the truth about the database in use.
    engine = settings.DATABASES["default"]["ENGINE"]
    banner = "\n".join(settings.SERVICES_BANNER)
    if "postgres" in engine:
        assert "database: postgres://" in banner
    else:
        assert "SQLite" in banner
