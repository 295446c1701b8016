"""Processes the fault tests start and stop themselves (by pid / process group, never by name):
Celery workers and beat on the test database, and busy loops that load the CPU."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.conftest import _database_url_of
from tests.helpers import free_port, wait_for


def celery_env(settings_module: str = "console.settings.test", **extra: str) -> dict:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "DATABASE_URL": _database_url_of(connection.settings_dict),
        **extra,
    }


def start(args: list[str], log_path: Path, env: dict) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            args, cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    process.log_path = log_path
    return process


def start_worker(
    folder: Path, name: str, queues: list[str], env: dict, concurrency: int = 1
) -> subprocess.Popen:
    args = [
        sys.executable, "-m", "celery", "-A", "console", "worker", "--pool", "prefork",
        "-Q", ",".join(queues), "--concurrency", str(concurrency),
        "--hostname", f"faults-{os.getpid()}-{name}@%h", "--loglevel", "INFO",
    ]  # fmt: skip
    worker = start(args, folder / f"{name}.log", env)
    wait_for(lambda: " ready." in worker.log_path.read_text(), timeout=90, what=f"{name} ready")
    return worker


def start_beat(folder: Path, env: dict) -> subprocess.Popen:
    args = [
        sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO",
        "--schedule", str(folder / "beat-schedule"), "--pidfile", str(folder / "beat.pid"),
    ]  # fmt: skip
    return start(args, folder / "beat.log", env)


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """Stop a process this test started, and its children (its own session), by pid."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def cpu_hog(processes: int = 2):
    """Busy loops, one per core of this 2-core machine, stopped by pid when the block ends."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(processes)
    ]
    try:
        yield [h.pid for h in hogs]
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


class PrivateRedis:
    """A redis-server of the test's own, on a free loopback port (never the shared one)."""

    def __init__(self, folder) -> None:
        self.folder, self.port = folder, free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        args = [
            shutil.which("redis-server") or "redis-server", "--port", str(self.port),
            "--bind", "127.0.0.1", "--dir", str(self.folder), "--appendonly", "yes",
            "--appendfsync", "always", "--save", "",
        ]  # fmt: skip
        self.process = start(args, self.folder / "redis.log", {})
        wait_for(lambda: "Ready to accept" in self.process.log_path.read_text(), timeout=30,
                 what="the private redis")  # fmt: skip

    def restart(self) -> None:
        stop(self.process)
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def app_broker(url: str):
    """This process's Celery app sends to `url` for the block."""
    from core.celery import app

    # Celery caches the connection pool and the producer pool built on it: the originals
    # are put aside untouched (kombu's registry still holds them) and put back after.
    saved = (app._pool, app.amqp._producer_pool, app.conf.broker_url)
    app._pool, app.amqp._producer_pool, app.conf.broker_url = None, None, url
    try:
        yield
    finally:
        if app._pool is not None:
            app._pool.force_close_all()
        app._pool, app.amqp._producer_pool, app.conf.broker_url = saved
