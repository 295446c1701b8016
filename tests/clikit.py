"""The `hangdesk` command as a user gets it: the README's own lines, run as written in a copy of
this checkout with a HOME of their own, installing into a fresh virtualenv (`pip install .`).
Registered for every suite by tests/conftest.py (the lab's push test runs it on the nodes)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def readme_block(marker: str) -> list[str]:
    """The lines of the ```sh block that follows `<!-- run by MARKER ... -->` in the README."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"<!-- run by {marker}")
    block = text[start:].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


@dataclass
class Installed:
    home: Path  # the HOME the README's lines ran under
    checkout: Path  # where they ran: a copy of this checkout
    bin: Path  # the virtualenv's bin/, hangdesk in it

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.home)}


def _copy_checkout(to: Path) -> None:
    """The files git would ship (tracked, and new ones not ignored): what a clone holds."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / name)


@pytest.fixture(scope="session")
def hangdesk_installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("cli")
    home, checkout = base / "home", base / "checkout"
    home.mkdir()
    _copy_checkout(checkout)
    installed = Installed(home, checkout, home / "hangdesk-cli" / "bin")
    env = installed.env()
    # pip's cache stays the machine's: a fresh HOME need not download setuptools again.
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    install = readme_block("tests/cli/test_readme_cli.py")[0]
    done = subprocess.run(
        ["bash", "-c", install], cwd=checkout, env=env, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{install}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert (installed.bin / "hangdesk").is_file()
    return installed
