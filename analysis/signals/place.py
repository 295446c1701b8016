"""Signals placed in a whole snapshot: the ranks a log's own maps give, the kernel's lines, RAS.

A log is read before its launcher's maps are known (torchrun's summary and rendezvous result,
DeepSpeed's world info, Ray's worker list come with the log itself), so a signal tied to a
local rank or a pid the node's environment does not know is placed again afterwards, through
the same maps the rest of the analysis uses. The kernel log's OOM kills, Xids and segfaults
(already read by `parsers.dmesg`) and its link lines become signals of the rank whose pid they
name, or of the node. An ncclras output is read once per node that gave one; RAS names hosts
by address, which NCCL's own configuration lines tie to nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from operator import attrgetter, itemgetter

from analysis.ncclconf import node_addresses
from analysis.parsers.dmesg import KernelFacts
from analysis.parsers.ncclras import RasReport, parse_ncclras
from analysis.signals.model import TEXT_CAP, LineSource, Signal
from analysis.signals.ras import ras_signals
from analysis.signals.reader import read_text
from analysis.signals.summary import SignalFacts, SignalPart, signal_part, summarise_parts

Resolve = Callable[[int | None, int | None], int | None]
_LAST_STEP_AT, _AT = attrgetter("last_step_at"), itemgetter(1)  # a datetime is never false


def host_map(nodes: Iterable[tuple[str, str]]) -> dict[str, str]:
    """How lines spell each node: its bundle name, its host name and their first labels."""
    hosts: dict[str, str] = {}
    for node, hostname in nodes:
        for name in (node, hostname):
            if name:
                hosts.setdefault(name, node)
                hosts.setdefault(name.split(".", 1)[0], node)
    return hosts


def placed(
    signals: Iterable[Signal], resolve: Resolve, pid_ranks: Mapping[int, int]
) -> list[Signal]:
    """The log's signals with ranks from its node's maps and its launcher's pids."""
    out = []
    for signal in signals:
        if signal.rank is None and (signal.local is not None or signal.pid is not None):
            rank = resolve(None, signal.local) if signal.local is not None else None
            if rank is None and signal.pid is not None:
                rank = pid_ranks.get(signal.pid)
            if rank is not None:
                signal = replace(signal, rank=rank)
        out.append(signal)
    return out


def kernel_signals(
    node: str, kernel: KernelFacts, pid_ranks: Mapping[int, int], source: LineSource
) -> list[Signal]:
    """The kernel's word on this node: OOM kills, Xids, segfaults (with the rank of the pid
    they name, when the environment gives one) and link errors."""
    found = [
        Signal("oom", pid_ranks.get(k.pid), node, k.line[:TEXT_CAP], pid=k.pid, at=k.at)
        for k in kernel.oom_kills
    ]
    found += [
        Signal(
            "xid",
            pid_ranks.get(x.pid) if x.pid is not None else None,
            node,
            x.line[:TEXT_CAP],
            code=x.xid,
            pid=x.pid,
        )
        for x in kernel.xids
    ]
    nvlink = [x for x in kernel.xids if x.xid == 74]  # Xid 74 is an NVLink error
    found += [Signal("link", None, node, x.line[:TEXT_CAP], code=74) for x in nvlink]
    found += [
        Signal("segfault", pid_ranks.get(s.pid), node, s.line[:TEXT_CAP], pid=s.pid)
        for s in kernel.segfaults
    ]
    if kernel.links:
        found += [s for s in read_text("\n".join(kernel.links), source) if s.kind == "link"]
    return found


def ras_report(text: str | None, source: LineSource) -> tuple[RasReport | None, list[Signal]]:
    report = parse_ncclras(text)
    return report, ras_signals(report, source)


def _unique_pids(parsed) -> dict[int, int]:
    """pid -> rank over the whole job, leaving out pids two nodes share (RAS names processes
    of every node, by pid and address)."""
    seen: dict[int, int | None] = {}
    for facts in parsed.nodes.values():
        for pid, rank in {**facts.log_pids, **facts.rank_pids}.items():
            seen[pid] = rank if pid not in seen or seen[pid] == rank else None
    return {pid: rank for pid, rank in seen.items() if rank is not None}


def add_signal_part(parsed, part: SignalPart) -> None:
    """A part of the snapshot's signals, after those placed one at a time so far (each rank's
    tally reads its signals in the merge's order)."""
    if parsed.raw_signals:
        parsed.signal_parts.append(signal_part(parsed.raw_signals))
        parsed.raw_signals = []
    if part.signals:
        parsed.signal_parts.append(part)


def snapshot_signals(parsed, world: int | None) -> SignalFacts:
    """Every signal of a ParsedSnapshot summed per rank and node, RAS read last: its hosts
    are addresses, which NCCL's configuration lines tie to nodes."""
    reports: list[tuple[str, RasReport]] = []
    ras: list[Signal] = []
    if parsed.ras_outputs:
        hosts = node_addresses(parsed)
        pids = _unique_pids(parsed)
        for node, text in parsed.ras_outputs:
            report, found = ras_report(text, LineSource("ncclras.txt", node, pids, hosts))
            if report is not None:
                reports.append((node, report))
                ras += found
    ranks = parsed.ranks  # (rank, its last step's time) for each that has one, in C
    steps = list(filter(_AT, zip(ranks, map(_LAST_STEP_AT, ranks.values()), strict=True)))
    add_signal_part(parsed, signal_part(ras))
    signals = summarise_parts(parsed.signal_parts, reports, ras, world, steps)
    parsed.signal_parts = []
    parsed.ras_outputs = []
    return signals
