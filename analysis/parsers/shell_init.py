"""`grep -Hn NCCL_ /etc/profile /etc/bashrc ~/.bashrc ...` output: variables that leak into
every later shell, typically left behind by an earlier debugging session."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"^(?P<path>[^:\s]+):(?:(?P<number>\d{1,9}):)?(?P<text>.*)$")
# The probe greps NCCL_ lines out of a few start-up files: a handful. More is not evidence.
_NAME = re.compile(r"NCCL_\w+")
MAX_SETTINGS = 1000
MAX_PROBLEMS = 20
_ASSIGN = re.compile(r"\b(NCCL_\w+)=(\"[^\"]*\"|'[^']*'|\S*)")


@dataclass(frozen=True)
class ShellInitSetting:
    path: str
    line_number: int | None
    name: str
    value: str
    line: str


def parse_shell_init(text: str | None) -> tuple[list[ShellInitSetting], list[str]]:
    settings: list[ShellInitSetting] = []
    problems: list[str] = []
    if not text:
        return settings, problems
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(settings) >= MAX_SETTINGS:
            problems.append(f"more than {MAX_SETTINGS} NCCL settings: the rest ignored")
            break
        match = _LINE.match(line.strip())
        if not match:
            if len(problems) < MAX_PROBLEMS:
                problems.append(f"shell start-up line not understood: {line[:120]!r}")
            continue
        body = match.group("text").strip()
        if body.startswith("#"):
            continue  # commented out: harmless
        assignments = _ASSIGN.findall(body)
        named = _NAME.search(body) if not assignments else None
        if named:
            assignments = [(named.group(0), "")]
        for name, value in assignments:
            settings.append(
                ShellInitSetting(
                    match.group("path"),
                    int(match.group("number")) if match.group("number") else None,
                    name,
                    value.strip("'\""),
                    line.strip(),
                )
            )
    return settings, problems
