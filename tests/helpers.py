"""Small helpers shared by the test suites."""

from __future__ import annotations

import time


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition"):
    """Poll until predicate() is truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
