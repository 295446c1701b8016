"""What the probe gathers on a node and within which bounds: the plan, and the rules its
settings must meet before it runs (the console's SSH visit and `hangdesk collect` alike).

The process pattern is matched by awk on the node (POSIX ERE) and globs are expanded there
(absolute paths only), so both are checked here, in Python, before any shell sees them.
Pure: no Django, no paramiko.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KiB = 1024
MiB = 1024 * KiB

# POSIX ERE (the probe matches it with awk against the ps command line); also a valid Python
# regex. Keep in step with the default in hangdesk/probe.sh.
DEFAULT_PROCESS_PATTERN = (
    r"torchrun|torch[.]distributed[.](run|launch)|pretrain_[A-Za-z0-9_]*[.]py|megatron"
    r"|[A-Za-z0-9_]*train[A-Za-z0-9_]*[.]py"
)

# The probe's own bounds: one command on the node (a py-spy dump, a log tail), stopped by
# `timeout` there; one whole visit; the TCP connect of an SSH visit. The console's task limits
# are derived from these (budget.py).
COMMAND_S = 20.0
VISIT_S = 60.0
CONNECT_S = 10.0
# py-spy's sampling window per process (all of a node's at once, each after its dump): where
# every rank spends its time, so a straggler is measured, not guessed from a dump.
SAMPLE_S = 2
SAMPLE_RATE = 50
# The GPU shape: nvidia-smi sampled this often over this window (skipped without a GPU).
GPU_SAMPLE_MS = 200
GPU_WINDOW_S = 2


def validate_process_pattern(pattern: str) -> str:
    """A process pattern is matched remotely by awk (POSIX ERE); reject what cannot work."""
    if not pattern or "\n" in pattern or "\0" in pattern:
        raise ValueError("process pattern must be a non-empty single line")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"process pattern is not a valid regular expression: {exc}") from exc
    python_only = _PYTHON_ONLY_REGEX.search(pattern)
    if python_only:
        raise ValueError(
            f"process pattern uses {python_only.group()!r}, which awk on the node does not "
            "understand: write it as a POSIX extended regex ([0-9] for \\d, (a|b) for (?:a|b))"
        )
    return pattern


# Python regex syntax that POSIX awk either rejects or reads differently.
_PYTHON_ONLY_REGEX = re.compile(r"\\[dDwWsSbBAZ]|\(\?|[*+?}]\?")


def validate_glob(pattern: str) -> str:
    """Globs are expanded on the node; they must be absolute single-line paths."""
    if not pattern.startswith("/") or "\n" in pattern or "\0" in pattern:
        raise ValueError(f"glob must be an absolute path on one line: {pattern!r}")
    return pattern


# A node's processes chosen by pid (a scheduler named them) are at most this many.
MAX_PIDS = 1024


# The plan's whole numbers that must be positive, and those with a range of their own.
_SIZES = (
    "tail_bytes",
    "artifact_cap_bytes",
    "max_total_bytes",
    "max_processes",
    "max_files",
    "gpu_sample_ms",
)
_RANGES = (
    ("gpu_window_s", 0, 30, "gpu_window_s must be between 0 and 30 seconds"),
    ("sample_seconds", 0, 30, "sample_seconds must be between 0 (no sampling) and 30 seconds"),
    ("sample_rate", 1, 1000, "sample_rate must be 1 to 1000 samples a second"),
)


@dataclass
class CollectionPlan:
    process_pattern: str = DEFAULT_PROCESS_PATTERN
    # Exactly these processes instead of the pattern's (None: the pattern): the pids a
    # scheduler names on this node (Ray's worker actors), whatever their command line says.
    pids: list[int] | None = None
    log_globs: list[str] = field(default_factory=lambda: ["/var/log/train/*.log"])
    flight_recorder_globs: list[str] = field(default_factory=lambda: ["/var/log/train/fr/*"])
    pyspy_command: str = "py-spy"
    # NCCL's RAS client, asked once per node when the node has it (on PATH by default).
    ncclras_command: str = "ncclras"
    # Seconds of `py-spy record` per process after its dump (0: no sampling), and its rate.
    sample_seconds: int = SAMPLE_S
    sample_rate: int = SAMPLE_RATE
    tail_bytes: int = 256 * KiB
    artifact_cap_bytes: int = 2 * MiB
    command_timeout_s: float = COMMAND_S
    total_timeout_s: float = VISIT_S
    connect_timeout_s: float = CONNECT_S
    # Bytes read from one node in total; a node that sends more is cut off.
    max_total_bytes: int = 64 * MiB
    max_processes: int = 128
    max_files: int = 256
    gpu_sample_ms: int = GPU_SAMPLE_MS
    gpu_window_s: int = GPU_WINDOW_S  # 0: one nvidia-smi reading, no sampling

    def validate(self) -> None:
        """Raise ValueError naming the first unusable setting (the collectors report it as an
        "invalid plan" status rather than raising)."""
        validate_process_pattern(self.process_pattern)
        self._validate_pids()
        for pattern in [*self.log_globs, *self.flight_recorder_globs]:
            validate_glob(pattern)
        for name in ("pyspy_command", "ncclras_command"):
            command = getattr(self, name)
            if not command or "\n" in command or "\0" in command:
                raise ValueError(f"{name} must be one command path on one line")
        self._validate_bounds()

    def _validate_pids(self) -> None:
        if self.pids is None:
            return
        if len(self.pids) > MAX_PIDS:
            raise ValueError(f"more than {MAX_PIDS} pids for one node")
        if any(not isinstance(pid, int) or not 0 < pid < 2**31 for pid in self.pids):
            raise ValueError("pids must be positive process ids")

    def _validate_bounds(self) -> None:
        for name in _SIZES:
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be positive")
        for name, low, high, problem in _RANGES:
            if not low <= int(getattr(self, name)) <= high:
                raise ValueError(problem)
        # A command timeout above the total is allowed: the total bounds everything anyway.
        for name in ("command_timeout_s", "total_timeout_s", "connect_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
