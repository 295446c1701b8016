"""Loopback addresses for a lab's nodes: one per node from a first address on, skipping .0 and
.255 in the last octet, all inside 127.0.0.0/8 (the lab's and the farm's traffic stays on
loopback)."""

from __future__ import annotations


def loopback_run(first: tuple[int, int, int, int], count: int) -> list[str] | None:
    """`count` addresses from `first` on, or None when they would leave 127.a.x.y."""
    a, b, c, d = first
    out, n = [], c * 256 + d
    while len(out) < count:
        if n % 256 not in (0, 255):
            out.append(f"{a}.{b}.{n // 256}.{n % 256}")
        n += 1
    if a != 127 or n > 256 * 256:
        return None
    return out
