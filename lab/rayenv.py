"""The Ray lab's own virtualenv: Ray 2.60 (dashboard and Train) and the lab's torch, pinned in
requirements-ray.txt, kept apart from the console's venv (the console never imports Ray: it
runs Ray's CLI on the head over SSH).

Built once, on the first `python -m lab up --ray` or by `make test` (`python -m lab.rayenv`),
at $HANGDESK_RAY_VENV or <repo>/.venv-ray; a stamp holding the requirements' SHA-256 says
it is complete and current, so a half-built or stale venv is rebuilt, never used. On this
machine: 1.6 GiB, about 4 minutes (torch from the local wheel, the rest from the index).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "requirements-ray.txt"
STAMP = ".hangdesk-ray-installed"
BUILD_TIMEOUT_S = 1800


class RayEnvError(RuntimeError):
    """The Ray venv cannot be built; the message says why."""


def venv_dir() -> Path:
    return Path(os.environ.get("HANGDESK_RAY_VENV") or REPO / ".venv-ray")


def python() -> Path:
    return venv_dir() / "bin" / "python"


def ray_cli() -> Path:
    return venv_dir() / "bin" / "ray"


def _wanted() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ready() -> bool:
    stamp = venv_dir() / STAMP
    return stamp.exists() and stamp.read_text().strip() == _wanted() and ray_cli().exists()


def ensure(log=print) -> Path:
    """The venv's python, building the venv first when it is missing or stale."""
    if ready():
        return python()
    target = venv_dir()
    started = time.monotonic()
    log(f"lab: building the Ray virtualenv {target} from {REQUIREMENTS.name} (once; minutes)")
    if target.exists():
        shutil.rmtree(target)
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(target)], check=True, timeout=300,
            capture_output=True,
        )  # fmt: skip
        subprocess.run(
            [str(python()), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
            check=True, timeout=BUILD_TIMEOUT_S, capture_output=True, text=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or exc.stdout or "")[-2000:] if isinstance(exc.stderr, str) else ""
        raise RayEnvError(f"building {target} failed ({exc.returncode}): {tail}") from exc
    except subprocess.TimeoutExpired as exc:
        raise RayEnvError(f"building {target} took over {exc.timeout:.0f} s") from exc
    (target / STAMP).write_text(_wanted() + "\n")
    log(f"lab: Ray virtualenv ready in {time.monotonic() - started:.0f} s ({_size(target)})")
    return python()


def _size(path: Path) -> str:
    total = sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    return f"{total / 2**30:.1f} GiB"


if __name__ == "__main__":
    try:
        print(ensure())
    except RayEnvError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        sys.exit(2)
