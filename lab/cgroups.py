"""Memory cgroups (v1) for the oom scenario: one small cgroup per victim rank."""

from __future__ import annotations

import os
from pathlib import Path

MEMORY_ROOT = Path("/sys/fs/cgroup/memory")


def available() -> bool:
    return (MEMORY_ROOT / "cgroup.procs").exists() and os.access(MEMORY_ROOT, os.W_OK)


def lab_root(lab_id: str) -> Path:
    return MEMORY_ROOT / f"hangdesk-lab-{lab_id}"


def create(lab_id: str, name: str, limit_bytes: int) -> Path:
    path = lab_root(lab_id) / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
    return path


def remove_all(lab_id: str) -> list[str]:
    """rmdir the lab's cgroups (children first). Returns what could not be removed."""
    root = lab_root(lab_id)
    left: list[str] = []
    if not root.exists():
        return left
    for child in [p for p in root.iterdir() if p.is_dir()]:
        try:
            child.rmdir()
        except OSError as exc:
            left.append(f"{child}: {exc}")
    try:
        root.rmdir()
    except OSError as exc:
        left.append(f"{root}: {exc}")
    return left
