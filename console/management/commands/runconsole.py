"""`make run`: migrate, make sure someone can log in, then run web + workers + beat together.

Ctrl-C (or SIGTERM) stops them all; if one of them dies, the others are stopped too,
so a half-running console never pretends to be healthy.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from console.celery import worker_command
from console.demo import demo_start, demo_stop


class Command(BaseCommand):
    help = "Run the console: web server, Celery workers and beat, until Ctrl-C."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HANGDESK_HOST", "127.0.0.1"))
        parser.add_argument(
            "--port", type=int, default=int(os.environ.get("HANGDESK_PORT", "8000"))
        )
        parser.add_argument(
            "--no-demo",
            action="store_true",
            default=os.environ.get("HANGDESK_DEMO", "1") == "0",
            help="do not start the demo lab (also: HANGDESK_DEMO=0)",
        )

    def handle(self, *args, host: str, port: int, no_demo: bool, **options):
        _prepare_var_dir()
        call_command("migrate", interactive=False, verbosity=0)
        self._announce_services()
        self._ensure_first_admin()
        children = self._start_children(host, port)
        url = f"http://{host}:{port}"
        demo = None if no_demo else self._start_demo(url)
        self.stdout.write(self.style.SUCCESS(f"\nhangdesk is up: {url}/  (Ctrl-C stops it)\n"))
        try:
            self._supervise(children)
        finally:
            if demo and demo.ok:
                self.stdout.write("stopping the demo lab...")
                for problem in demo_stop():
                    self.stderr.write(problem)

    def _start_demo(self, url: str):
        self.stdout.write("starting the demo lab (a hung training job on this machine)...")
        demo = demo_start()
        if demo.ok:
            self.stdout.write(f"demo: {demo.message}")
            self.stdout.write(self.style.SUCCESS(f"demo incident: {url}{demo.incident_url}"))
        else:
            self.stdout.write(self.style.WARNING(f"no demo: {demo.message}"))
        return demo

    def _announce_services(self) -> None:
        database = settings.DATABASES["default"]
        self.stdout.write(f"database: {database['ENGINE'].rsplit('.', 1)[-1]} {database['NAME']}")
        broker = settings.REDIS_URL or f"filesystem broker in {settings.BROKER_DIR}"
        self.stdout.write(f"broker:   {broker}")

    def _ensure_first_admin(self) -> None:
        users = get_user_model()
        admin = users.objects.filter(is_superuser=True).order_by("pk").first()
        if admin:
            self.stdout.write(
                f"log in as {admin.get_username()} (reset its password with "
                f"`.venv/bin/python manage.py changepassword {admin.get_username()}`)"
            )
            return
        password = secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", email="", password=password)
        self.stdout.write(
            self.style.WARNING(f"first admin created: user admin, password {password}")
        )
        self.stdout.write("(shown once; keep it or reset it with manage.py changepassword admin)")

    def _start_children(self, host: str, port: int) -> dict[str, subprocess.Popen]:
        python = sys.executable
        commands = {
            "web": [python, "manage.py", "runserver", f"{host}:{port}", "--noreload"],
            # One worker per workload (settings.HANGDESK_WORKERS): SSH visits and housekeeping,
            # the final verdicts apart (a large analysis never holds up a snapshot), and the
            # work before the last node apart from them (the final never waits behind it).
            **{f"worker {name}": worker_command(name) for name in settings.HANGDESK_WORKERS},
            "beat": [
                python, "-m", "celery", "-A", "console", "beat",
                "-s", settings.CELERY_BEAT_SCHEDULE_FILENAME, "--loglevel", "WARNING",
            ],
        }  # fmt: skip
        # Each child leads its own process group, so stopping it stops whatever it spawned.
        return {
            name: subprocess.Popen(command, cwd=settings.BASE_DIR, start_new_session=True)
            for name, command in commands.items()
        }

    def _supervise(self, children: dict[str, subprocess.Popen]) -> None:
        stopping = False

        def request_stop(signum, frame):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        while not stopping:
            for name, child in children.items():
                if child.poll() is not None:
                    self.stderr.write(f"{name} exited with status {child.returncode}; stopping.")
                    stopping = True
            time.sleep(0.5)
        self.stdout.write("stopping web, workers and beat...")
        # The main processes shut their own children down cleanly (Celery's warm shutdown);
        # whatever is left after the grace period is killed with its whole group.
        for child in children.values():
            with contextlib.suppress(ProcessLookupError):
                child.terminate()
        deadline = time.monotonic() + 15
        for child in children.values():
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(child, signal.SIGKILL)
                child.wait()
        self.stdout.write("stopped.")


def _prepare_var_dir() -> None:
    """Make VAR_DIR (beat's schedule file lives there) and keep the dev secret key in it, so
    the web, worker and beat processes started next share this process's key."""
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    key_file = getattr(settings, "DEV_SECRET_KEY_FILE", None)
    if key_file is None or os.environ.get("DJANGO_SECRET_KEY"):
        return
    with contextlib.suppress(FileExistsError):
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(settings.SECRET_KEY)


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signum)
