"""The watch's cheap read of one node: the script it sends (probe.sh with shell-quoted
settings) and what the frames that come back say. Pure: no Django, no SSH (the connection is
collectors.visits.run_script's)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from clusters.sshspec import validate_glob, validate_process_pattern
from hangdesk import frames

SCRIPT_PATH = Path(__file__).with_name("probe.sh")
KiB = 1024
# What one node may send in one period: the ps lines and the log tails, with room to spare.
MAX_PROCESSES = 256
MAX_LOG_FILES = 64
MAX_ARGS_CHARS = 300
MAX_STACK_BYTES = 64 * KiB  # of one process's dump


@dataclass(frozen=True)
class ReadPlan:
    """What to read on one node: the process pattern always; log tails only on the nodes
    whose logs carry step lines (an empty list: presence check only)."""

    process_pattern: str
    log_globs: tuple[str, ...] = ()
    tail_bytes: int = 16 * KiB
    command_timeout_s: float = 5.0
    # Each process's stack and parent too (py-spy dump): only while the job has no first
    # step, to tell a job stuck in init from one still starting (watch/progress.py).
    stacks: bool = False
    pyspy_command: str = "py-spy"

    def validate(self) -> None:
        validate_process_pattern(self.process_pattern)
        for pattern in self.log_globs:
            validate_glob(pattern)
        if not 0 < self.tail_bytes <= 1024 * KiB:
            raise ValueError("tail_bytes must be between 1 and 1 MiB")


def render_script(plan: ReadPlan, nonce: str) -> bytes:
    """The full script for `sh -s`: every setting shell-quoted, the probe library, then the
    constant probe (hangdesk.frames.render_script)."""
    plan.validate()
    settings = {
        "HD_PATTERN": plan.process_pattern,
        "HD_LOG_GLOBS": "\n".join(plan.log_globs),
        "HD_TAIL_BYTES": str(int(plan.tail_bytes)),
        "HD_MAX_FILES": str(MAX_LOG_FILES),
        "HD_MAX_PROCS": str(MAX_PROCESSES),
        "HD_CMD_TIMEOUT": str(max(1, math.ceil(plan.command_timeout_s))),
        "HD_NONCE": nonce,
        "HD_STACKS": "1" if plan.stacks else "0",
        "HD_PYSPY": plan.pyspy_command or "py-spy",
    }
    return frames.render_script(SCRIPT_PATH, settings)


@dataclass(frozen=True)
class Process:
    pid: int
    state: str
    elapsed_s: int
    args: str

    @property
    def alive(self) -> bool:
        return not self.state.startswith(("Z", "X"))


@dataclass
class NodeReading:
    """One node's answer in one period."""

    node: str
    ok: bool
    error: str = ""
    processes: list[Process] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)  # path -> tail
    stacks: dict[int, str] = field(default_factory=dict)  # pid -> py-spy dump (when read)
    parents: dict[int, int] = field(default_factory=dict)  # pid -> ppid (when stacks are read)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def live_pids(self) -> list[int]:
        return sorted(p.pid for p in self.processes if p.alive)


def parse_processes(text: str) -> list[Process]:
    out = []
    for line in text.splitlines()[:MAX_PROCESSES]:
        parts = line.split(None, 3)
        if len(parts) < 4 or not parts[0].isdigit() or not parts[2].isdigit():
            continue
        out.append(Process(int(parts[0]), parts[1][:8], int(parts[2]), parts[3][:MAX_ARGS_CHARS]))
    return out


def reading_from_frames(
    node: str, frames: dict[str, bytes], *, error: str = "", bytes_read: int = 0, seconds: float = 0
) -> NodeReading:
    """Turn the frames into a reading; `error` set means the visit failed (what came is kept)."""
    reading = NodeReading(node=node, ok=not error, error=error, bytes_read=bytes_read)
    reading.seconds = seconds
    reading.processes = parse_processes(_text(frames.get("ps", b"")))
    for key, data in frames.items():
        if key.startswith("log.") and key.endswith(".path"):
            body = frames.get(key.removesuffix(".path"))
            if body is not None:
                reading.logs[_text(data)] = _text(body)
    for key, data in frames.items():
        if key.startswith("stack.") and key[6:].isdigit():
            reading.stacks[int(key[6:])] = _text(data[:MAX_STACK_BYTES])
    for line in _text(frames.get("tree", b"")).splitlines()[:MAX_PROCESSES]:
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            reading.parents[int(parts[0])] = int(parts[1])
    problems = _text(frames.get("errors", b"")).strip()
    if problems and not reading.error:
        reading.error = problems[:500]
    return reading


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
