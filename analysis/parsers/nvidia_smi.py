"""`nvidia-smi` default table and `nvidia-smi --query-gpu=... --format=csv` output."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_GPU_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s*\|\s*([0-9A-Fa-f:.]+)\s")
_USAGE_ROW = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB\s*\|\s*(\d+|N/A)%?")
_PROCESS_ROW = re.compile(
    r"^\|\s+(\d+)\s+(?:\S+\s+\S+\s+)?(\d+)\s+([CGM+]+)\s+(.+?)\s+(\d+)MiB\s*\|"
)


@dataclass
class Gpu:
    index: int
    name: str = ""
    bus_id: str = ""
    utilization: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None


@dataclass
class GpuProcess:
    gpu: int
    pid: int
    name: str
    memory_mib: int


@dataclass
class GpuFacts:
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_nvidia_smi(text: str | None) -> GpuFacts:
    facts = GpuFacts()
    if not text or not text.strip():
        return facts
    first = text.strip().splitlines()[0]
    if "," in first and "|" not in first and not first.startswith("+"):
        return _parse_csv(text, facts)
    current: Gpu | None = None
    in_processes = False
    for line in text.splitlines():
        if "Processes:" in line:
            in_processes = True
            continue
        if in_processes:
            match = _PROCESS_ROW.match(line)
            if match:
                facts.processes.append(
                    GpuProcess(
                        int(match.group(1)),
                        int(match.group(2)),
                        match.group(4),
                        int(match.group(5)),
                    )
                )
            continue
        match = _GPU_ROW.match(line)
        if match:
            current = Gpu(int(match.group(1)), match.group(2).strip(), match.group(4))
            facts.gpus.append(current)
            continue
        if current is not None and current.memory_total_mib is None:
            usage = _USAGE_ROW.search(line)
            if usage:
                current.memory_used_mib = int(usage.group(1))
                current.memory_total_mib = int(usage.group(2))
                util = usage.group(3)
                current.utilization = int(util) if util.isdigit() else None
    if not facts.gpus:
        facts.problems.append("no GPU rows found in nvidia-smi output")
    return facts


def _number(cell: str) -> int | None:
    match = re.match(r"\s*(\d+)", cell)
    return int(match.group(1)) if match else None


def _parse_csv(text: str, facts: GpuFacts) -> GpuFacts:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    has_header = any(h in ("index", "name", "utilization.gpu", "memory.used") for h in header)
    if not has_header:
        facts.problems.append("nvidia-smi CSV without a header (use --format=csv, not noheader)")
        return facts
    for position, line in enumerate(lines[1:]):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header):
            facts.problems.append(f"nvidia-smi CSV row has {len(cells)} cells: {line[:80]!r}")
            continue
        row = dict(zip(header, cells, strict=True))
        index = _number(row.get("index", "")) if "index" in row else position
        facts.gpus.append(
            Gpu(
                index=index if index is not None else position,
                name=row.get("name", ""),
                bus_id=row.get("pci.bus_id", ""),
                utilization=_number(row.get("utilization.gpu", "")),
                memory_used_mib=_number(row.get("memory.used", "")),
                memory_total_mib=_number(row.get("memory.total", "")),
            )
        )
    return facts
