"""Small helpers shared by the test suites."""

from __future__ import annotations

import random
import socket
import time
from pathlib import Path


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll until predicate() is truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def child_pids(pid: int) -> list[int]:
    """The pids of a process's children (a worker's pool, the console's services), from /proc."""
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def free_port() -> int:
    """A TCP port nothing on 127.0.0.1 listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port_pair() -> int:
    """A port free on every address together with the one above it: a lab's rendezvous port
    (torch binds *:port) and init-hang's wrong one, port + 1. A lone free_port() can sit just
    below a port in use, and the lab then refuses it.

    Drawn below the kernel's ephemeral range: a port from inside it (bind to port 0) can be
    taken by any outbound connection between this check and the lab's own (seen in CI beside
    other suites: the lab refused 0.0.0.0:port+1); one below it only by another listener."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(max(1024, low - 12_000), low - 1)
        if all(_free_everywhere(p) for p in (port, port + 1)):
            return port
    raise AssertionError("no free pair of TCP ports found in 100 tries")


def _ephemeral_low() -> int:
    """The low end of the kernel's port range for outbound connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _free_everywhere(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))  # noqa: S104 - a probe bind, closed at once
        except OSError:
            return False
        return True
