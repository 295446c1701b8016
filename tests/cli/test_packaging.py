"""What `pip install .` ships, read from pyproject.toml without building: every package the
command line and the analysis are made of (a package left out installs fine and fails at its
first import, on the user's machine), and every file beside their code."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED_TREES = ("hangdesk", "analysis")
DOCS = {"README.md"}  # a package's own notes for readers of the source, not read by its code


def _setuptools_config() -> dict:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    return {
        ".".join(init.parent.relative_to(ROOT).parts)
        for tree in SHIPPED_TREES
        for init in (ROOT / tree).rglob("__init__.py")
    }


def test_the_wheel_ships_every_package_of_the_command_and_the_analysis():
    found = set(find_packages(where=str(ROOT), **_setuptools_config()["packages"]["find"]))
    missing = _packages_on_disk() - found
    assert not missing, f"pyproject.toml's packages.find leaves out {sorted(missing)}"
    assert "hangdesk.masking" in found  # the checks see a subpackage


def test_the_wheel_ships_every_file_beside_the_code():
    data = _setuptools_config().get("package-data", {})
    for package in _packages_on_disk():
        folder = ROOT.joinpath(*package.split("."))
        for path in folder.iterdir():
            if path.is_file() and path.suffix != ".py" and path.name not in DOCS:
                assert path.name in data.get(package, []), f"{path} is not in package-data"
