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
from dataclasses import dataclass, field

MAX_TEXT = 8 << 20  # characters of one ncclras output read
MAX_COMMS = 4096
MAX_RANKS = 16384  # ranks kept per communicator (JSON lists every rank)
MAX_NAMED = 4096  # ranks named in the text's blocks


@dataclass(frozen=True)
class RasRank:
    """One rank (or, with rank None, one job process) RAS names."""

    rank: int | None  # within its communicator
    host: str | None
    pid: int | None
    missing: bool = False  # no data from it (unresponsive, or no longer a member)
    dead: bool = False  # RAS considers the process dead
    error: str = ""  # an initialisation or asynchronous error it reported, an abort
    ops: tuple[tuple[str, int], ...] = ()  # operations launched, per kind (JSON)
    behind: bool = False  # in a mismatch, it launched fewer operations than others
    line: str = ""


@dataclass(frozen=True)
class RasComm:
    name: str  # "#0-0" (text) or the hash (JSON)
    size: int | None
    status: str = ""  # RUNNING / INIT / FINALIZE / NOCOMM / ... as printed
    errors: tuple[str, ...] = ()  # OK / MISMATCH / INCOMPLETE / ERROR / ...
    ranks: tuple[RasRank, ...] = ()  # JSON: every rank; text: the ranks a block names
    # (operation, launched up to, ranks at that count); operation "" when not said.
    op_counts: tuple[tuple[str, int, int], ...] = ()
    hash: str | None = None


@dataclass(frozen=True)
class RasReport:
    format: str  # "json" | "text"
    version: str | None = None
    comms: tuple[RasComm, ...] = ()
    processes: tuple[RasRank, ...] = ()  # job processes missing data or dead (no rank)
    timeouts: int = 0
    problems: tuple[str, ...] = ()

    @property
    def world(self) -> int | None:
        sizes = [c.size for c in self.comms if c.size]
        return max(sizes) if sizes else None

    @property
    def ok(self) -> bool:
        """Every communicator OK and no process missing: RAS sees nothing wrong."""
        return (
            bool(self.comms)
            and not self.processes
            and all(c.errors == ("OK",) and not _named_trouble(c) for c in self.comms)
        )


def _named_trouble(comm: RasComm) -> bool:
    return any(r.missing or r.dead or r.error or r.behind for r in comm.ranks)


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


# --- text ------------------------------------------------------------------------------------

_ROW = re.compile(
    r"\s{0,8}(\d{1,6})\s{1,16}(\d{1,9})\s{1,16}(\d{1,9})\s{1,16}(\d{1,9}(?:-\d{1,9})?)"
    r"\s{1,16}(\d{1,9})\s{1,16}(\d{1,9})\s{1,16}([A-Z]{2,16})\s{1,16}([A-Z,]{2,80})\s{0,16}$"
)
_COMM_HEADER = re.compile(r"#(\d{1,6})-(\d{1,9}) \(([0-9a-fA-F]{1,16})\) ([A-Z,]{2,80})\s{0,16}$")
_PROCESS = re.compile(r"\s{0,8}Process (\d{1,9}) on node ([\w.:\[\]-]{1,255}) managing GPU")
_RANK_LINE = re.compile(
    r"\s{0,8}Rank (\d{1,9})(?: (has launched up to operation (\d{1,20})|has not launched any"
    r" operations|has status \w{1,16}|reported [^\n]{1,120}?))? -- (?:GPU [\w ,()]{1,80} managed by"
    r" process (\d{1,9}) on node ([\w.:\[\]-]{1,255})|\[process information not found\])"
)
_MISSING_RANK = re.compile(r"\s{0,8}The missing rank(?:s)?: (\d{1,9}(?:, ?\d{1,9}){0,1023})")
_GROUP_COUNT = re.compile(
    r"\s{0,8}(\d{1,9}) ranks? (?:have|has) (?:launched up to operation (\d{1,20})|not launched"
    r" any operations)"
)
_DIFFERENT_OP = re.compile(r"different (\w{1,40} )?operation counts")
_TIMEOUTS = re.compile(r"Encountered (\d{1,9}) communication timeouts?")
_VERSION = re.compile(r"^NCCL version (\S{1,40}) compiled")


@dataclass
class _Block:
    kind: str  # "INCOMPLETE" | "DEAD" | "comm"
    comm: str = ""
    errors: tuple[str, ...] = ()
    op: str = ""
    counts: list[tuple[int, int]] = field(default_factory=list)  # (launched up to, ranks)
    current: int | None = None  # the count of the group whose outliers follow
    named: list[tuple[RasRank, int | None]] = field(default_factory=list)  # (rank, its count)


class RasTextReader:
    """The text form, one line at a time. `feed` returns the blocks it closed."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.table = False  # inside the communicators' summary table
        self.rows: dict[int, tuple[int, str, tuple[str, ...]]] = {}  # group -> size, status, errors
        self.block: _Block | None = None
        self.closed: list[_Block] = []
        self.timeouts = 0
        self.seen = False  # any RAS line at all

    def feed(self, line: str) -> bool:
        """Read one line; True when it was part of a RAS report."""
        stripped = line.strip()
        if not stripped:
            self._close()
            self.table = False
            return self.seen
        if stripped.startswith("NCCL version ") and " compiled with CUDA " in stripped:
            match = _VERSION.match(stripped)
            self.version = match.group(1) if match else None
            return False
        if stripped.startswith("Group     Comms"):
            self.table = self.seen = True
            return True
        if self.table:
            return self._row(line)
        return self._block_line(stripped, line)

    def _row(self, line: str) -> bool:
        match = _ROW.match(line)
        if match and len(self.rows) < MAX_COMMS:
            errors = tuple(match.group(8).split(",")[:8])
            self.rows[int(match.group(1))] = (int(match.group(5)), match.group(7), errors)
        return True

    def _block_line(self, stripped: str, line: str) -> bool:
        if stripped in ("INCOMPLETE", "DEAD"):
            self._open(_Block(stripped))
            return True
        header = _COMM_HEADER.match(stripped)
        if header:
            errors = tuple(header.group(4).split(",")[:8])
            self._open(_Block("comm", f"#{header.group(1)}-{header.group(2)}", errors))
            return True
        if stripped in ("Errors", "Warnings", "TIMEOUT") or stripped.startswith("==="):
            self._close()
            return self.seen
        timeouts = _TIMEOUTS.search(stripped)
        if timeouts:
            self.timeouts += int(timeouts.group(1))
            return True
        if self.block is None:
            return False
        return self._detail(stripped, line)

    def _detail(self, stripped: str, line: str) -> bool:
        block = self.block
        assert block is not None
        if len(block.named) >= MAX_NAMED:
            return True
        process = _PROCESS.match(line)
        if process:
            pid, host = int(process.group(1)), process.group(2)
            dead = block.kind == "DEAD"
            block.named.append((RasRank(None, host, pid, True, dead, line=stripped), None))
            return True
        match = _RANK_LINE.match(line)
        if match:
            self._rank_line(block, match, stripped)
            return True
        missing = _MISSING_RANK.match(line)
        if missing:
            for rank in missing.group(1).replace(" ", "").split(",")[:MAX_NAMED]:
                block.named.append((RasRank(int(rank), None, None, True, line=stripped), None))
            return True
        group = _GROUP_COUNT.match(line)
        if group:
            block.current = int(group.group(2) or 0)
            block.counts.append((block.current, int(group.group(1))))
            return True
        if (
            " have status " in stripped
            or " has status " in stripped
            or "different status" in stripped
        ):
            block.current = None  # a group by status, not by operation count
            return True
        different = _DIFFERENT_OP.search(stripped)
        if different:
            block.op = (different.group(1) or "").strip()
        return True

    def _rank_line(self, block: _Block, match: re.Match, stripped: str) -> None:
        rank = int(match.group(1))
        pid = int(match.group(4)) if match.group(4) else None
        host = match.group(5)
        phrase = match.group(2) or ""
        count = None if phrase.startswith(("has status", "reported")) else block.current
        if match.group(3) is not None:
            count = int(match.group(3))
            block.counts.append((count, 1))
        elif "not launched" in phrase:
            count = 0
            block.counts.append((0, 1))
        missing = "INCOMPLETE" in block.errors
        error = "reported an error" if "ERROR" in block.errors and not missing else ""
        block.named.append((RasRank(rank, host, pid, missing, error=error, line=stripped), count))

    def _open(self, block: _Block) -> None:
        self._close()
        self.block = block
        self.seen = True

    def _close(self) -> None:
        if self.block is not None and len(self.closed) < MAX_COMMS:
            self.closed.append(self.block)
        self.block = None

    def report(self) -> RasReport:
        self._close()
        comms: dict[str, RasComm] = {}
        processes: list[RasRank] = []
        for block in self.closed:
            if block.kind != "comm":
                processes += [rank for rank, _ in block.named]
                continue
            comms[block.comm] = self._comm(block, comms.get(block.comm))
        for group, (size, status, errors) in sorted(self.rows.items()):
            name = f"#{group}-0"
            if name not in comms:
                comms[name] = RasComm(name, size, status, errors)
        return RasReport(
            format="text",
            version=self.version,
            comms=tuple(comms.values()),
            processes=tuple(processes),
            timeouts=self.timeouts,
        )

    def _comm(self, block: _Block, earlier: RasComm | None) -> RasComm:
        group = int(block.comm[1:].split("-", 1)[0])
        size, status, _ = self.rows.get(group, (None, "", ()))
        values = [value for value, _ in block.counts]
        low = min(values) if len(set(values)) > 1 else None
        ranks = [
            RasRank(
                r.rank, r.host, r.pid, r.missing, r.dead, r.error, behind=count == low, line=r.line
            )
            if low is not None and count is not None
            else r
            for r, count in block.named
        ]
        counts = tuple((block.op, value, n) for value, n in block.counts[:256])
        if earlier is not None:
            ranks = list(earlier.ranks) + ranks
            counts = earlier.op_counts + counts
        errors = tuple(dict.fromkeys((earlier.errors if earlier else ()) + block.errors))
        return RasComm(block.comm, size, status, errors, tuple(ranks[:MAX_RANKS]), counts)


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
