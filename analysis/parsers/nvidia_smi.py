"""`nvidia-smi` default table and `nvidia-smi --query-gpu=... --format=csv` output."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Table rows are read cell by cell with str methods, not regexes: the text is untrusted, and
# a backtracking pattern over a row of spaces took 16 s. Rows are at most ~130 characters;
# anything longer is not nvidia-smi's and is skipped.
_ROW_CAP = 400
_MAX_ROWS = 4096
_PROCESS_TYPES = frozenset({"C", "G", "M", "C+G", "M+C", "M+G", "M+C+G"})


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
    for line in text.splitlines()[: _MAX_ROWS * 4]:
        if len(line) > _ROW_CAP or not line.startswith("|"):
            continue
        if "Processes:" in line:
            in_processes = True
            continue
        cells = line.strip().strip("|").split("|")
        if in_processes:
            process = _process_row(cells)
            if process and len(facts.processes) < _MAX_ROWS:
                facts.processes.append(process)
            continue
        gpu = _gpu_row(cells)
        if gpu is not None and len(facts.gpus) < _MAX_ROWS:
            current = gpu
            facts.gpus.append(current)
        elif current is not None and current.memory_total_mib is None:
            _read_usage(cells, current)
    if not facts.gpus:
        facts.problems.append("no GPU rows found in nvidia-smi output")
    return facts


def _gpu_row(cells: list[str]) -> Gpu | None:
    """`   0  Tesla T4   On  |   00000000:00:1B.0 Off |   0 `: index, name, persistence."""
    if len(cells) < 2:
        return None
    words = cells[0].split()
    if len(words) < 3 or not words[0].isdecimal() or words[-1] not in ("On", "Off"):
        return None
    bus = cells[1].split()
    return Gpu(int(words[0]), " ".join(words[1:-1]), bus[0] if bus else "")


def _mib(word: str) -> int | None:
    digits = word.removesuffix("MiB")
    return int(digits) if word.endswith("MiB") and digits.isdecimal() else None


def _read_usage(cells: list[str], gpu: Gpu) -> None:
    """`...| 6049MiB / 15360MiB | 100% Default |`: memory used and total, utilisation."""
    for index, cell in enumerate(cells):
        used, slash, total = cell.partition("/")
        if not slash or "MiB" not in cell:
            continue
        used_mib, total_mib = _mib(used.strip()), _mib(total.strip())
        if used_mib is None or total_mib is None:
            continue
        gpu.memory_used_mib, gpu.memory_total_mib = used_mib, total_mib
        after = cells[index + 1].split() if index + 1 < len(cells) else []
        util = after[0].removesuffix("%") if after else ""
        gpu.utilization = int(util) if util.isdecimal() else None
        return


def _process_row(cells: list[str]) -> GpuProcess | None:
    """`  0   N/A  N/A   58   C   python3.12   6046MiB ` (GI/CI columns optional)."""
    words = cells[0].split() if cells else []
    if len(words) < 4 or not words[0].isdecimal():
        return None
    memory = _mib(words[-1])
    kind = next((i for i, w in enumerate(words[1:-1], 1) if w in _PROCESS_TYPES), None)
    if memory is None or kind is None or kind < 2 or not words[kind - 1].isdecimal():
        return None
    return GpuProcess(int(words[0]), int(words[kind - 1]), " ".join(words[kind + 1 : -1]), memory)


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
