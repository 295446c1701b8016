"""ncclras's text form, one line at a time (docs: troubleshooting/ras.rst; NVIDIA/nccl issues
1762 and 1911): the communicators' summary table, then the `Errors` and `Warnings` blocks.
Every expression is anchored and bounded; every list kept is capped."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from analysis.parsers.ncclras_model import (
    MAX_COMMS,
    MAX_NAMED,
    MAX_RANKS,
    RasComm,
    RasRank,
    RasReport,
)

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
