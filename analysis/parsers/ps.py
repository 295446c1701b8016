"""`ps -eo pid,ppid,stat,etimes,args` output."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PsRow:
    pid: int
    ppid: int
    stat: str
    elapsed_s: int | None
    args: str

    @property
    def state(self) -> str:
        """The one-letter process state (R, S, D, Z, T, ...)."""
        return self.stat[:1]


def parse_ps(text: str | None) -> tuple[list[PsRow], list[str]]:
    rows: list[PsRow] = []
    problems: list[str] = []
    if not text:
        return rows, problems
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("PID"):
            continue
        parts = stripped.split(None, 4)
        try:
            pid, ppid = int(parts[0]), int(parts[1])
            stat = parts[2]
            elapsed = int(parts[3]) if parts[3].isdigit() else None
            args = parts[4] if len(parts) > 4 else ""
        except (IndexError, ValueError):
            problems.append(f"ps line {number} not understood: {stripped[:120]!r}")
            continue
        rows.append(PsRow(pid, ppid, stat, elapsed, args))
    return rows, problems
