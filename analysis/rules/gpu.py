"""The GPU's shape (analysis/gpushape.py) read as the sources read it, when nothing proves the
job is moving: some ranks' GPUs flat at 100 % (NCCL busy-waiting in a collective) and others at
0 % holding their memory (stuck on the CPU side) is a deadlock with split rank states, and the
idle ones are the ranks the others wait for (A); every GPU idle with its memory held is a job
stuck on the CPU side (A, weak: no rank stands out)."""

from __future__ import annotations

from analysis.facts import Facts
from analysis.findings import Finding
from analysis.gpushape import GpuSeries
from analysis.verdict import Quote, QuoteKind, ranks_text

QUOTED = 6


def _by_reading(facts: Facts) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for rank, (series, _how) in sorted(facts.gpu.items()):
        found.setdefault(series.reading, []).append(rank)
    return found


def gpu_text(rank: int, series: GpuSeries, how: str) -> str:
    utils = [p.util for p in series.recent() if p.util is not None]
    span = f"{min(utils)}-{max(utils)}%" if utils and min(utils) != max(utils) else f"{utils[0]}%"
    memory = f" holding {series.memory_mib} MiB" if series.memory_mib is not None else ""
    since = series.since()
    when = f" since {since:%H:%M:%S} UTC" if since else ""
    gpu = f"GPU {series.index}" if series.index is not None else f"GPU {series.uuid[:12]}"
    return (
        f"rank {rank}: {gpu} on {series.node} at {span}{memory}{when} over "
        f"{len(utils)} {series.source} samples (joined by {how}): {series.reading}"
    )


def _quotes(facts: Facts, ranks: list[int]) -> list[Quote]:
    quoted = []
    for rank in ranks[:QUOTED]:
        series, how = facts.gpu[rank]
        quoted.append(Quote(QuoteKind.GPU, series.node, rank, gpu_text(rank, series, how)))
    return quoted


def gpu_split(facts: Facts) -> Finding | None:
    if facts.progress.progressing:
        return None
    readings = _by_reading(facts)
    spinning, idle = readings.get("spin", []), readings.get("idle", [])
    if not spinning or not idle:
        return None
    nodes = sorted({facts.gpu[r][0].node for r in idle})
    return Finding(
        "A",
        0.6,
        f"The GPUs of {ranks_text(spinning)} are flat at 100 % (NCCL busy-waiting in a "
        f"collective) while {ranks_text(idle)} sit{'s' if len(idle) == 1 else ''} at 0 % holding "
        "memory: split rank states, a deadlock. The idle ranks are stuck on the CPU side and the "
        "others wait for them.",
        suspects=tuple(idle),
        suspect_nodes=tuple(nodes),
        evidence=tuple(_quotes(facts, idle) + _quotes(facts, spinning)[:2]),
        check=f"py-spy dump --pid on {ranks_text(idle[:3])}: a frame outside any collective "
        "(data loading, I/O, a lock) confirms it.",
        rule="gpu_split",
    )


def gpu_cpu_side(facts: Facts) -> Finding | None:
    if facts.progress.progressing or len(facts.gpu) < 2:
        return None
    readings = _by_reading(facts)
    idle = readings.get("idle", [])
    if len(idle) != len(facts.gpu):
        return None
    return Finding(
        "A",
        0.4,
        f"Every GPU ({ranks_text(idle)}) idles at 0 % with its memory held: the job is stuck on "
        "the CPU side (data loading, file I/O, a Python lock), not in a collective.",
        evidence=tuple(_quotes(facts, idle)),
        check="py-spy dump of a few ranks: the frame they share outside the collectives is "
        "where they wait.",
        rule="gpu_cpu_side",
    )
