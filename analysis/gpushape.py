"""The GPU's shape over time, per GPU and joined to ranks: the sources' first look.

Two sources, one shape: the probe's `nvidia-smi --query-gpu=... --format=csv,nounits -lms`
samples (a few seconds), and DCGM exporter series a Prometheus held for the hour before the
snapshot (the console reads them, collectors/gpumetrics.py, and stores them with each node's
evidence as `dcgm.json`). What a series says (docs/domain.md):
- flat at 100 % with no progress: NCCL busy-waiting inside a collective ("spin");
- 0 % with memory held: the rank is stuck on the CPU side (data, I/O, a Python lock) ("idle");
- moving between the two: working, perhaps slowly ("busy");
- some GPUs spinning and others idle: a deadlock with split rank states.

A series is joined to a rank by the rank's pid in nvidia-smi's process list, else by its
CUDA_VISIBLE_DEVICES, else by its LOCAL_RANK (one GPU per local rank). Bounded: at most
MAX_ROWS sample rows and MAX_POINTS points per series are read. Pure: no Django.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from analysis import codec, gpucells
from analysis.gpucells import SHOWN_POINTS
from analysis.records import as_int, as_opt_float, as_opt_int, as_opt_str, as_str

SPIN_AT = 90  # percent, every sample of the window at or above: spinning
IDLE_AT = 5  # percent, every sample at or below: idle
HELD_MIB = 1024  # a training rank holds gigabytes; a bare CUDA context a few hundred MiB
MAX_ROWS = 20_000
MAX_POINTS = 720  # an hour at 5 s
MAX_DCGM_ITEMS = 4096  # series of a node's stored DCGM hour read (a GPU's metrics are four)
# Of `dcgm_encoded`'s form: bumped when parse_dcgm or GpuSeries change what a parse holds (a
# form of another version is refused and the series parsed again).
DCGM_PARSED_VERSION = 1
RECENT_S = 300.0  # a long series is judged on its last five minutes
SOURCE_SAMPLES = "nvidia-smi samples"  # the system facts the shape is read from
SOURCE_DCGM = "dcgm"
_MISSING = object()
DCGM_METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "DCGM_FI_DEV_FB_USED": "memory",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}


@dataclass  # not frozen: every GPU's hour on every node is built (frozen: ~1.5x the cost)
class Point:
    at: datetime | None
    util: int | None
    memory_mib: int | None = None
    power_w: float | None = None


@dataclass
class GpuSeries:
    node: str
    index: int | None
    uuid: str
    source: str  # "nvidia-smi" or "dcgm"
    points: list[Point] = field(default_factory=list)
    memory_total_mib: int | None = None
    ecc_uncorrected: int | None = None
    xid: int | None = None  # the last Xid DCGM saw on it

    def recent(self) -> list[Point]:
        timed = [p for p in self.points if p.at is not None]
        if len(timed) < 2:
            return self.points
        cutoff = timed[-1].at.timestamp() - RECENT_S
        return [p for p in self.points if p.at is None or p.at.timestamp() >= cutoff]

    @property
    def reading(self) -> str:
        """spin, idle, busy, empty (0 % and no memory: no job), or unknown."""
        utils = [p.util for p in self.recent() if p.util is not None]
        if not utils:
            return "unknown"
        if min(utils) >= SPIN_AT:
            return "spin"
        if max(utils) <= IDLE_AT:
            memory = [p.memory_mib for p in self.recent() if p.memory_mib is not None]
            return "idle" if memory and max(memory) >= HELD_MIB else "empty"
        return "busy"

    @property
    def memory_mib(self) -> int | None:
        memory = [p.memory_mib for p in self.points if p.memory_mib is not None]
        return memory[-1] if memory else None

    def since(self) -> datetime | None:
        """When the series entered its current reading (the hang's onset, often)."""
        reading = self.reading
        if reading not in ("spin", "idle"):
            return None
        start = None
        for point in reversed(self.points):
            if point.util is None or point.at is None:
                continue
            inside = point.util >= SPIN_AT if reading == "spin" else point.util <= IDLE_AT
            if not inside:
                break
            start = point.at
        return start


@dataclass(frozen=True)
class GpuRow:
    """One rank's GPU in the diagnosis: what the page's strip draws and the rules read."""

    rank: int
    node: str
    gpu: int | None
    source: str
    reading: str
    util: tuple[int | None, ...] = ()  # at most SHOWN_POINTS, oldest first
    memory_mib: int | None = None
    since: datetime | None = None
    joined_by: str = ""  # pid, CUDA_VISIBLE_DEVICES, LOCAL_RANK
    cell_s: float | None = None  # how long each of `util`'s cells spans; None: points counted

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "node": self.node,
            "gpu": self.gpu,
            "source": self.source,
            "reading": self.reading,
            "util": list(self.util),
            "memory_mib": self.memory_mib,
            "since": self.since.isoformat() if self.since else None,
            "joined_by": self.joined_by,
            "cell_s": self.cell_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GpuRow:
        get = data.get
        util = get("util") if isinstance(get("util"), list) else []
        since = get("since")
        try:
            when = datetime.fromisoformat(since) if isinstance(since, str) else None
        except ValueError:
            when = None
        return cls(
            rank=as_int(get("rank")),
            node=as_str(get("node")),
            gpu=as_opt_int(get("gpu")),
            source=as_str(get("source")),
            reading=as_str(get("reading"), "unknown"),
            # Bounded to the strip's cells, the newest kept (the strip's right end).
            util=tuple(u if isinstance(u, int) else None for u in util[-SHOWN_POINTS:]),
            memory_mib=as_opt_int(get("memory_mib")),
            since=when,
            joined_by=as_opt_str(get("joined_by")) or "",
            cell_s=_positive(as_opt_float(get("cell_s"))),
        )


# --- nvidia-smi samples --------------------------------------------------------------------


def _number(cell: str) -> float | None:
    """`100`, `100 %`, `31566 MiB`, `47.25 W`; `[N/A]`, `[Not Supported]` and the rest: None."""
    word = cell.strip().split(" ", 1)[0]
    try:
        value = float(word)
    except ValueError:
        return None
    return value if value == value and abs(value) < 1e12 else None  # no NaN, no giants


def _int(cell: str | None) -> int | None:
    value = _number(cell) if cell is not None else None
    return int(value) if value is not None else None


def _when(text: str) -> datetime | None:
    try:  # nvidia-smi's own: "2024/06/24 15:48:31.123" (local time; read as UTC)
        return datetime.strptime(text.strip()[:26], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_samples(node: str, text: str | None) -> list[GpuSeries]:
    """`nvidia-smi --query-gpu=... --format=csv[,nounits] [-lms N]`: one series per GPU. The
    header names the columns (any order, units in brackets); a row of the wrong width or a
    header repeated by the loop is skipped."""
    lines = [line for line in (text or "").splitlines()[:MAX_ROWS] if line.strip()]
    if not lines or "," not in lines[0]:
        return []
    header = [h.strip().split(" [", 1)[0] for h in lines[0].split(",")]
    by_gpu: dict[str, GpuSeries] = {}
    for position, line in enumerate(lines[1:]):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(header) or cells[0] == lines[0].split(",")[0].strip():
            continue
        row = dict(zip(header, cells, strict=True))
        index = _int(row.get("index"))
        key = row.get("uuid") or str(index if index is not None else position)
        series = by_gpu.get(key)
        if series is None:
            series = by_gpu[key] = GpuSeries(node, index, row.get("uuid", ""), "nvidia-smi")
        if len(series.points) >= MAX_POINTS:
            continue
        series.points.append(
            Point(
                at=_when(row.get("timestamp", "")),
                util=_int(row.get("utilization.gpu")),
                memory_mib=_int(row.get("memory.used")),
                power_w=_number(row.get("power.draw", "")),
            )
        )
        series.memory_total_mib = _int(row.get("memory.total")) or series.memory_total_mib
        ecc = _int(row.get("ecc.errors.uncorrected.volatile.total"))
        series.ecc_uncorrected = ecc if ecc is not None else series.ecc_uncorrected
    return list(by_gpu.values())


# --- DCGM series from Prometheus -----------------------------------------------------------


def parse_dcgm(node: str, text: str | None) -> list[GpuSeries]:
    """The node's DCGM series as the console stored them: {"series": [{"metric": name,
    "gpu": "0", "UUID": ..., "values": [[unix time, "value"], ...]}, ...]} (Prometheus's
    query_range matrix, cut to this node). Unknown metrics and malformed points are skipped."""
    try:
        stored = json.loads(text) if text else {}
    except (ValueError, RecursionError):
        return []
    return dcgm_series(node, stored)


def dcgm_series(node: str, stored: object) -> list[GpuSeries]:
    """`parse_dcgm` of the stored form already decoded (the console's own read, parsed as it
    is stored: its JSON text is not made to be read again)."""
    series = stored.get("series") if isinstance(stored, dict) else None
    if not isinstance(series, list):
        return []
    merged: dict[str, dict[float, dict[str, float]]] = {}
    identity: dict[str, tuple[int | None, str]] = {}
    for item in series[:MAX_DCGM_ITEMS]:
        metric = item.get("metric") if isinstance(item, dict) else None
        what = DCGM_METRICS.get(metric) if isinstance(metric, str) else None
        if what is None:
            continue
        gpu, uuid = _int(str(item.get("gpu", ""))), str(item.get("UUID", ""))[:64]
        key = uuid or str(gpu)
        identity[key] = (gpu, uuid)
        values = item.get("values")
        if isinstance(values, list):
            by_time = merged.setdefault(key, {})
            _dcgm_points(values[:MAX_POINTS], what, by_time)
            if not by_time:  # a GPU is listed once a point of it is read
                del merged[key]
    return [_dcgm_series(node, *identity[key], by_time) for key, by_time in merged.items()]


def _dcgm_points(values: list, what: str, by_time: dict[float, dict[str, float]]) -> None:
    # This runs for every point of every node's hour: one plain loop, float() first (the
    # checks of `_number` kept: a string that float() refuses is read by it).
    for point in values:
        if not isinstance(point, list) or len(point) != 2:
            continue
        at, raw = point
        if not isinstance(at, int | float):
            continue
        if type(raw) is str:
            try:
                value = float(raw)
            except ValueError:
                value = _number(raw)
            else:
                value = value if value == value and abs(value) < 1e12 else None
        else:
            value = _number(str(raw))
        if value is None:
            continue
        try:
            stamp = float(at)
        except OverflowError:  # an integer past a float's range
            continue
        slot = by_time.get(stamp)
        if slot is None:
            slot = by_time[stamp] = {}
        slot[what] = value


def _dcgm_series(
    node: str, gpu: int | None, uuid: str, by_time: dict[float, dict[str, float]]
) -> GpuSeries:
    shape = GpuSeries(node, gpu, uuid, "dcgm")
    for at in sorted(by_time)[-MAX_POINTS:]:
        values = by_time[at]
        util, memory = values.get("util"), values.get("memory")
        shape.points.append(
            Point(
                at=_from_unix(at),
                util=int(util) if util is not None else None,
                memory_mib=int(memory) if memory is not None else None,
                power_w=values.get("power"),
            )
        )
        if values.get("xid"):
            shape.xid = int(values["xid"])
    return shape


# Every GPU of every node is sampled at the same instants: each instant's datetime made once.
_STAMPS: dict[float, datetime | None] = {}
_STAMPS_CACHED = 8192


def _from_unix(value: float) -> datetime | None:
    known = _STAMPS.get(value, _MISSING)
    if known is not _MISSING:
        return known
    try:
        when = datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        when = None
    if len(_STAMPS) >= _STAMPS_CACHED:
        _STAMPS.clear()
    _STAMPS[value] = when
    return when


def dcgm_encoded(series: list[GpuSeries]) -> Any:
    """`parse_dcgm`'s series as plain JSON (analysis/codec.py), to be stored and decoded."""
    return codec.encode(series, list[GpuSeries])


def dcgm_decoded(node: str, data: Any) -> list[GpuSeries]:
    """`dcgm_encoded`'s form read back (untrusted): the series, or CodecError for a form of
    another shape or one `parse_dcgm` of `node` could not have made."""
    series = codec.decode(data, list[GpuSeries])
    if len(series) > MAX_DCGM_ITEMS:
        raise codec.CodecError(f"{len(series)} series")
    for one in series:
        if one.node != node or one.source != SOURCE_DCGM or not 0 < len(one.points) <= MAX_POINTS:
            raise codec.CodecError("not a DCGM parse of this node")
    return series


def node_series(node: str, system: Mapping[str, str]) -> list[GpuSeries]:
    """Every GPU series of a node's evidence: DCGM's hour first, else the probe's samples."""
    dcgm = parse_dcgm(node, system.get(SOURCE_DCGM))
    return dcgm or parse_samples(node, system.get(SOURCE_SAMPLES))


# --- joined to ranks -----------------------------------------------------------------------


@dataclass(frozen=True)
class RankGpuHint:
    """What a rank tells of its GPU: its pid's GPU in nvidia-smi's process list (index or
    UUID), its CUDA_VISIBLE_DEVICES, its LOCAL_RANK."""

    rank: int
    node: str
    pid_gpu: int | None = None
    pid_uuid: str = ""
    visible: str = ""
    local_rank: int | None = None


def join(series: list[GpuSeries], hints: list[RankGpuHint]) -> dict[int, tuple[GpuSeries, str]]:
    """rank -> (its GPU's series, how they were joined)."""
    by_node: dict[str, list[GpuSeries]] = defaultdict(list)
    for one in series:
        by_node[one.node].append(one)
    joined = {}
    for hint in hints:
        candidates = by_node.get(hint.node, [])
        found = _match(candidates, hint)
        if found is not None:
            joined[hint.rank] = found
    return joined


def _match(candidates: list[GpuSeries], hint: RankGpuHint) -> tuple[GpuSeries, str] | None:
    def by_index(index: int | None) -> GpuSeries | None:
        return next((s for s in candidates if index is not None and s.index == index), None)

    if hint.pid_uuid:
        found = next((s for s in candidates if s.uuid and s.uuid == hint.pid_uuid), None)
        if found:
            return found, "pid"
    if hint.pid_gpu is not None and by_index(hint.pid_gpu):
        return by_index(hint.pid_gpu), "pid"
    devices = [d.strip() for d in hint.visible.split(",") if d.strip()]
    if devices:
        chosen = devices[0] if len(devices) == 1 else None
        if chosen is None and hint.local_rank is not None and hint.local_rank < len(devices):
            chosen = devices[hint.local_rank]
        if chosen is not None:
            found = next((s for s in candidates if s.uuid and s.uuid == chosen), None)
            found = found or (by_index(int(chosen)) if chosen.isdecimal() else None)
            if found:
                return found, "CUDA_VISIBLE_DEVICES"
    if hint.local_rank is not None and by_index(hint.local_rank):
        return by_index(hint.local_rank), "LOCAL_RANK"
    return None


def rows(joined: Mapping[int, tuple[GpuSeries, str]]) -> list[GpuRow]:
    shown = gpucells.shown_util([series for series, _ in joined.values()], MAX_POINTS)
    out = []
    for rank in sorted(joined):
        series, how = joined[rank]
        cells, cell_s = shown[id(series)]
        out.append(
            GpuRow(
                rank=rank,
                node=series.node,
                gpu=series.index,
                source=series.source,
                reading=series.reading,
                util=cells,
                memory_mib=series.memory_mib,
                since=series.since(),
                joined_by=how,
                cell_s=cell_s,
            )
        )
    return out


def _positive(seconds: float | None) -> float | None:
    return seconds if seconds is not None and 0 < seconds < float("inf") else None


# --- the strip on the page -----------------------------------------------------------------

STRIP_RANKS = 64
CELL_W, CELL_H, LABEL_W = 6, 10, 64
READING_WORDS = {
    "spin": "flat at 100 %: NCCL spinning",
    "idle": "0 % holding memory: CPU side",
    "busy": "moving",
    "empty": "no job on it",
    "unknown": "not read",
}


def _span_words(spans: set) -> str:
    """'1 min', '30 s', or '10 s to 2 min' when rows differ (each node's own samples)."""
    low, high = _duration(min(spans)), _duration(max(spans))
    return low if low == high else f"{low} to {high}"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 59.5 else f"{round(seconds / 60, 1):g} min"


def _level(util: int | None) -> str:
    if util is None:
        return "na"
    return "u0" if util <= IDLE_AT else "u1" if util <= 40 else "u2" if util < SPIN_AT else "u3"


def strip(gpu_rows: tuple[GpuRow, ...] | list[GpuRow]) -> dict | None:
    """A small per-rank utilisation strip, as data for a server-drawn SVG (no script, so the
    page's Content-Security-Policy needs nothing): a row per rank (the first STRIP_RANKS), a
    cell per point, each cell's level a CSS class."""
    if not gpu_rows:
        return None
    shown = sorted(gpu_rows, key=lambda r: r.rank)[:STRIP_RANKS]
    points = max((len(r.util) for r in shown), default=0) or 1
    rows = []
    for line, row in enumerate(shown):
        offset = points - len(row.util)  # the newest points line up on the right
        rows.append(
            {
                "rank": row.rank,
                "y": line * (CELL_H + 2),
                "text_y": line * (CELL_H + 2) + CELL_H - 1,
                "label": f"rank {row.rank}",
                "reading": row.reading,
                "title": f"rank {row.rank}, GPU {row.gpu} on {row.node} ({row.source}): "
                f"{READING_WORDS.get(row.reading, row.reading)}",
                "cells": [
                    {"x": LABEL_W + (offset + i) * CELL_W, "level": _level(u),
                     "title": f"{u}%" if u is not None else "no reading"}
                    for i, u in enumerate(row.util)
                ],
            }
        )  # fmt: skip
    sources = sorted({r.source for r in shown})
    timed = all(r.cell_s is not None for r in shown)
    return {
        # What a cell spans, when every row's cells are times (else they are points).
        "cell_span": _span_words({r.cell_s for r in shown}) if timed else "",
        "rows": rows,
        "width": LABEL_W + points * CELL_W + 4,
        "height": len(rows) * (CELL_H + 2),
        "cell_w": CELL_W - 1,
        "cell_h": CELL_H,
        "hidden": max(0, len(gpu_rows) - len(shown)),
        "source": " and ".join(sources),
        "points": points,
    }
