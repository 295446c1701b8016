"""NCCL RAS (`ncclras`, NCCL 2.24+): the job's communicators as RAS sees them, text or JSON.

The text form (docs: troubleshooting/ras.rst; NVIDIA/nccl issues 1762, 1911) is a summary table
of communicator groups (`Group Comms Nodes Ranks.. Status Errors`: RUNNING / INIT / FINALIZE /
NOCOMM and OK / MISMATCH / INCOMPLETE / ERROR), then `Errors` and `Warnings` sections of
blocks: `INCOMPLETE` / `DEAD` job processes (`Process 3487984 on node 172.16.64.213 managing
GPU 5`), and per communicator `#0-0 (cf264af53edbe986) INCOMPLETE` with its missing ranks
(`Rank 21 -- GPU 5 managed by process 3487984 on node ...`, or `The missing rank: 21` in older
versions), `ERROR` with the ranks that reported one, `MISMATCH` with rank groups (`30 ranks
have launched up to operation 640`) and the outliers of each group listed under it.

The JSON form (`ncclras -f json`, 2.28.7+) dumps every communicator's ranks with host, pid,
status and per-operation counts, and its `missing_ranks`. NCCL 2.28.7 to 2.28.9 print a missing
rank's `"nvml_dev": 1` without the comma before `"status"` (fixed in 2.29: compare
src/ras/client_support.cc at ae7aed19 and ebd1e929): the reader puts missing commas back, and
when the text still is not JSON it reads the missing ranks field by field. A text banner
printed in front of the JSON (RCCL did, ROCm/rocm-systems#6700) is skipped.

Ranks in RAS are ranks within each communicator: the rank of the job is the same number only
in a communicator as large as the job (the analysis maps the others through their pids).
Everything is bounded: the text read, the blocks, the ranks kept per communicator.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from analysis.parsers.ncclras_model import (
    MAX_COMMS,
    MAX_RANKS,
    MAX_TEXT,
    RasComm,
    RasRank,
    RasReport,
)
from analysis.parsers.ncclras_text import RasTextReader

__all__ = [
    "RasComm",
    "RasEvent",
    "RasRank",
    "RasReport",
    "RasTextReader",
    "event_line",
    "event_objects",
    "looks_like_ras",
    "parse_json",
    "parse_ncclras",
]

_COMM_MARK = re.compile(r"^#\d{1,6}-\d{1,9} \([0-9a-fA-F]{1,16}\) [A-Z]", re.MULTILINE)


def looks_like_ras(text: str) -> bool:
    head = text[:4000]
    return (
        "Group     Comms" in head
        or '"communicators"' in head
        or "Missing communicator data" in head
        or "considered dead (unreachable via the RAS network)" in head
        or "ranks have launched up to operation" in head
        or ("#" in head and ") " in head and _COMM_MARK.search(head) is not None)
    )


def parse_ncclras(text: str | None) -> RasReport | None:
    """The report in an ncclras output, JSON or text; None when the text is neither."""
    if not text or not text.strip():
        return None
    text = text[:MAX_TEXT]
    brace = text.find("{")
    if brace >= 0 and '"communicators"' in text[brace : brace + 100_000]:
        return parse_json(text[brace:])
    reader = RasTextReader()
    for line in text.splitlines():
        reader.feed(line)
    report = reader.report()
    return report if report.comms or report.processes else None


# --- JSON ------------------------------------------------------------------------------------

# A value ending a line, then a line starting with a key: the comma NCCL 2.28.7-2.28.9 forgot.
_MISSING_COMMA = re.compile(r'([0-9"el}\]])([ \t]{0,64}\r?\n[ \t]{0,64}")')
_FIELD = re.compile(r'"(rank|host|pid|size|hash)": ("([^"\\]{0,255})"|-?\d{1,12})')


def parse_json(text: str) -> RasReport:
    problems: list[str] = []
    data = _loads(text)
    if data is None:
        repaired = _MISSING_COMMA.sub(r"\1,\2", text)
        data = _loads(repaired)
        problems.append(
            "ncclras JSON was malformed (missing commas, as NCCL 2.28.7-2.28.9 print it); "
            + ("repaired" if data is not None else "read field by field")
        )
    if not isinstance(data, dict):
        return _salvage(text, tuple(problems))
    comms = [_json_comm(c) for c in _list(data.get("communicators"))[:MAX_COMMS]]
    ras = data.get("ras") if isinstance(data.get("ras"), dict) else {}
    return RasReport(
        format="json",
        version=_str(data.get("nccl_version")),
        comms=tuple(c for c in comms if c is not None),
        timeouts=_int(ras.get("timeouts_count")) or 0,
        problems=tuple(problems),
    )


def _loads(text: str):
    end = text.rfind("}")
    try:
        return json.loads(text[: end + 1] if end >= 0 else text)
    except (ValueError, RecursionError):
        return None


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value) -> str | None:
    return value[:255] if isinstance(value, str) else None


def _json_rank(item: dict, missing: bool) -> RasRank | None:
    rank = _int(item.get("rank"))
    status = item.get("status") if isinstance(item.get("status"), dict) else {}
    error = ""
    if not missing:
        if (_int(status.get("init_state")) or 0) not in (0, 7):
            error = f"initialisation error {status.get('init_state')}"
        elif _int(status.get("async_error")):
            error = f"asynchronous error {status.get('async_error')}"
        elif status.get("abort_flag") is True:
            error = "communicator aborted"
    counts = item.get("collective_counts")
    ops = tuple(
        (str(op)[:40], count)
        for op, count in (list(counts.items())[:32] if isinstance(counts, dict) else [])
        if _int(count) is not None
    )
    return RasRank(
        rank=rank,
        host=_str(item.get("host")),
        pid=_int(item.get("pid")),
        missing=missing,
        dead=missing and status.get("considered_dead") is True,
        error=error,
        ops=ops,
    )


def _json_comm(item) -> RasComm | None:
    if not isinstance(item, dict):
        return None
    ranks = [
        _json_rank(r, False) for r in _list(item.get("ranks"))[:MAX_RANKS] if isinstance(r, dict)
    ]
    gone = [
        _json_rank(r, True)
        for r in _list(item.get("missing_ranks"))[:MAX_RANKS]
        if isinstance(r, dict)
    ]
    present = [r for r in ranks if r is not None]
    behind = _behind_by_counts(present)
    present = [
        RasRank(r.rank, r.host, r.pid, error=r.error, ops=r.ops, behind=r.rank in behind)
        for r in present
    ]
    members = present + [r for r in gone if r is not None]
    errors = []
    if gone:
        errors.append("INCOMPLETE")
    if any(r.error for r in present):
        errors.append("ERROR")
    if behind:
        errors.append("MISMATCH")
    return RasComm(
        name=_str(item.get("hash")) or "?",
        hash=_str(item.get("hash")),
        size=_int(item.get("size")),
        errors=tuple(errors) or ("OK",),
        ranks=tuple(members),
        op_counts=_op_counts(present),
    )


def _totals(ranks: list[RasRank]) -> dict[int, int]:
    return {r.rank: sum(v for _, v in r.ops) for r in ranks if r.rank is not None and r.ops}


def _behind_by_counts(ranks: list[RasRank]) -> set[int]:
    """Ranks that launched fewer operations than the most advanced ones: a minority behind
    the others is where a frozen mismatch points (a majority behind a few is ranks ahead)."""
    totals = _totals(ranks)
    if len(set(totals.values())) < 2:
        return set()
    low = min(totals.values())
    behind = {r for r, total in totals.items() if total == low}
    return behind if len(behind) * 2 <= len(totals) else set()


def _op_counts(ranks: list[RasRank]) -> tuple[tuple[str, int, int], ...]:
    counted: dict[tuple[str, int], int] = {}
    for rank in ranks:
        for op, value in rank.ops:
            counted[(op, value)] = counted.get((op, value), 0) + 1
    return tuple((op, value, n) for (op, value), n in sorted(counted.items())[:256])


def _salvage(text: str, problems: tuple[str, ...]) -> RasReport:
    """What can still be read from a JSON output that does not parse: its missing ranks."""
    comms = []
    for section in text.split('"missing_ranks"')[1 : MAX_COMMS + 1]:
        body = section[: section.find("]")] if "]" in section else section[:100_000]
        rank: dict = {}
        gone = []
        for match in _FIELD.finditer(body[:1_000_000]):
            key, raw, quoted = match.groups()
            value = quoted if quoted is not None else int(raw)
            if key == "rank" and rank:
                gone.append(rank)
                rank = {}
            rank[key] = value
            if len(gone) >= MAX_RANKS:
                break
        if rank:
            gone.append(rank)
        members = tuple(
            RasRank(_int(r.get("rank")), _str(r.get("host")), _int(r.get("pid")), missing=True)
            for r in gone
        )
        comms.append(RasComm(name="?", size=None, errors=("INCOMPLETE",), ranks=members))
    return RasReport(format="json", comms=tuple(comms), problems=problems)


# --- monitoring mode (ncclras -m, 2.29+) -------------------------------------------------------

# Lifecycle events that say a peer is in trouble (src/ras/peers.cc, rasnet.cc); PEER_NEW,
# PEER_CONNECTING and PEER_RETRY are the RAS network at work.
TROUBLE_EVENTS = frozenset(
    {
        "PEER_DEAD",
        "PEER_TIMEOUT_DEAD",
        "PEER_UNRESPONSIVE",
        "PEER_SEND_STUCK",
        "PEER_DISCONNECTED",
        "PEER_INIT_TIMEOUT",
    }
)
MAX_EVENTS = 4096


@dataclass(frozen=True)
class RasEvent:
    event: str
    host: str | None
    pid: int | None
    line: str


_EVENT_LINE = re.compile(
    r"\[[\d: -]{10,24}\] (PEER_[A-Z_]{2,32}): (?:Process (\d{1,9}) on node ([\w.:\[\]-]{1,255}))?"
)


def event_line(line: str) -> RasEvent | None:
    """`[2025-12-19 13:07:07] PEER_DEAD: Process 1524345 on node 172.16.64.245 managing GPU 1`"""
    if "PEER_" not in line:
        return None
    match = _EVENT_LINE.search(line[:600])
    if not match:
        return None
    pid = int(match.group(2)) if match.group(2) else None
    return RasEvent(match.group(1), match.group(3), pid, line.strip()[:1000])


def event_objects(text: str) -> list[RasEvent]:
    """The JSON events of `ncclras -m -f json`, one object after another."""
    decoder = json.JSONDecoder()
    events: list[RasEvent] = []
    at = text.find("{")
    while 0 <= at < len(text) and len(events) < MAX_EVENTS:
        try:
            item, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            break
        if isinstance(item, dict) and isinstance(item.get("event"), str):
            peer = item.get("peer") if isinstance(item.get("peer"), dict) else {}
            host = _str(peer.get("host")) or _str(peer.get("addr"))
            line = f"ncclras -m: {item['event'][:40]} {host or ''} pid {peer.get('pid')}"
            events.append(RasEvent(item["event"][:40], host, _int(peer.get("pid")), line))
        at = text.find("{", end)
    return events
