"""One pass over one text: every line tied to its rank and node, every signal it states.

`SignalReader` keeps the little state lines need from each other:
- the pids NCCL's communicator set-up lines tie to ranks (`comm 0x.. rank 3 nranks 8 ... Init
  COMPLETE`), read before anything else so a `host:pid:tid ... NCCL WARN` line above them is
  placed too;
- the writer of the line above (an indented line continues it), and the signals of the last
  failure line until the next line that is not indented: an entry's indented `pid: 694415` /
  `ip: 10.0.0.3` lines (Ray's actor errors) say whom it was about;
- each writer's traceback: its `File "..."` lines and the source lines under them say nothing,
  the exception line that ends it does, and an exception raised inside the rendezvous or the
  c10d store is a rendezvous failure;
- the block a line sits in (`analysis.signals.blocks`): `scontrol show node`'s `NodeName=`,
  ibstat's HCA, an ncclras report.

Bounded: each line is read in its first `WINDOW` characters, the text kept in a signal is cut
at `TEXT_CAP`, and each kind keeps its first `KEEP_FIRST` and latest `KEEP_LAST` signals
(progress its first few and latest `KEEP_PROGRESS`).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, replace

from analysis.parsers import launchers, nccl
from analysis.parsers.ncclras import (
    RasTextReader,
    event_line,
    event_objects,
    looks_like_ras,
    parse_json,
)
from analysis.signals import nodes, who
from analysis.signals.blocks import Blocks
from analysis.signals.exceptions import exception_line, in_rendezvous
from analysis.signals.kinds import classify, may_say_anything
from analysis.signals.model import TEXT_CAP, LineSource, Signal
from analysis.signals.progress import bar_end, progress
from analysis.signals.ras import event_signal, ras_signals
from analysis.signals.times import line_time

WINDOW = 4096
KEEP_FIRST = 32
KEEP_LAST = 32
KEEP_PROGRESS = 64
MAX_LEARNED = 65_536
MAX_TASKS = 64  # signals one srun line may give, one per task it names
_TRACEBACKS = 256  # writers followed at once through a traceback
NO_SOURCE = LineSource()
# A log line's own header in the middle of a line: two lines run together (a progress bar ends
# with a carriage return, and a paste loses it). Each part is read as the line it was.
_RUN_ON = re.compile(
    r"\]\[(?:[EWIF]\d{3,4} \d\d:\d\d:\d\d|[EWIF] [\w.]{1,80}\.(?:cpp|cc|hpp|h):\d{1,6}\]"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)"
)
MAX_RUNS = 4
_NODE_KINDS = frozenset({"node_state", "evicted"})


class _Kept:
    """Per kind: the first signals (the cause usually comes first) and the latest ones."""

    def __init__(self) -> None:
        self.first: dict[str, list[Signal]] = {}
        self.last: dict[str, deque[Signal]] = {}

    def add(self, signal: Signal) -> None:
        first = self.first.setdefault(signal.kind, [])
        keep_first = 4 if signal.kind == "progress" else KEEP_FIRST
        if len(first) < keep_first:
            first.append(signal)
            return
        keep_last = KEEP_PROGRESS if signal.kind == "progress" else KEEP_LAST
        self.last.setdefault(signal.kind, deque(maxlen=keep_last)).append(signal)

    def all(self) -> list[Signal]:
        out = [s for kept in self.first.values() for s in kept]
        out += [s for kept in self.last.values() for s in kept]
        out.sort(key=lambda s: s.line_no)
        return out


@dataclass
class _Traceback:
    rendezvous: bool = False
    source_next: bool = False  # the line after `File "..."` is the source quoted


class SignalReader:
    def __init__(self, source: LineSource = NO_SOURCE) -> None:
        self.source = source
        self._file: tuple[int | None, int | None, str | None] | None = None  # read when needed
        self.learned: dict[int, tuple[int, int]] = {}  # pid -> (rank, communicator size)
        self.started: dict[int, int] = {}  # pid -> rank, from a launcher's start lines
        self.masters: frozenset[str] = frozenset()  # Kubeflow jobs whose master pod is named
        self.widest = 0
        self.data_threads: set[tuple[str, str, str]] = set()  # NCCL host:pid:tid past set-up
        self.kept = _Kept()
        self.line_no = 0
        self.previous: tuple[int | None, int | None, str | None, int | None] | None = None
        self.tracebacks: dict[tuple, _Traceback] = {}
        self.ras: RasTextReader | None = None
        self.pending: list[Signal] = []
        self.blocks = Blocks()
        self.previous_line: str | None = None  # a quiet line, read again if indented ones follow
        self.held: str | None = None  # a line that may go on in the next one (a terminal's wrap)
        self.hinted = False  # the last line read named something a failure line names

    # -- whole texts ---------------------------------------------------------------------------

    def read_text(self, text: str) -> None:
        if self.prepare(text):
            return
        for line in text.splitlines():
            self.read_line(line)

    def prepare(self, text: str) -> bool:
        """Look at the whole text before its lines: True when it was read whole (ncclras's
        JSON), else learn what its lines need from each other."""
        if self._structured(text):
            return True
        self.masters = who.master_pods(text)
        if looks_like_ras(text):
            self.ras = RasTextReader()
        if " nranks " in text:
            self.learn(text)
        return False

    def read_line(self, line: str) -> None:
        """One line of the text, split where two log lines ran together, joined to the line
        above when a terminal wrapped one sentence over both (`... exited on ` then
        `signal 6 (Aborted).`)."""
        held, self.held = self.held, None
        if held is not None and line[:1].islower():
            line = held.rstrip() + " " + line
        before = self.line_no, len(self.pending)
        self._read_parts(line)
        if line[-1:] in (" ", "\t") and len(line) < 400 and self._said_nothing(before):
            self.held = line

    def _said_nothing(self, before: tuple[int, int]) -> bool:
        """The line just read (after `before`) gave no failure and had something to say."""
        return self.line_no == before[0] + 1 and len(self.pending) == before[1] and self.hinted

    def _read_parts(self, line: str) -> None:
        if "][" in line:
            for part in _runs(line):
                self.read(part)
        else:
            self.read(line)

    def _structured(self, text: str) -> bool:
        """ncclras's JSON: a report, or monitoring events (a text banner may come first)."""
        brace = text.find("{")
        if brace < 0 or '"' not in text[brace : brace + 200]:
            return False
        if '"communicators"' in text[brace : brace + 100_000]:
            for signal in ras_signals(parse_json(text[brace:]), self.source):
                self.kept.add(signal)
            return True
        if '"event": "PEER_' in text[brace : brace + 2000]:
            for event in event_objects(text[brace:]):
                signal = event_signal(event, self.source)
                if signal is not None:
                    self.kept.add(signal)
            return True
        return False

    def learn(self, text: str) -> None:
        """Tie pids to ranks through NCCL's communicator set-up lines, widest communicator
        first (a sub-communicator numbers its ranks within itself)."""
        for line in text.splitlines():
            if " nranks " not in line or len(self.learned) >= MAX_LEARNED:
                continue
            fact = nccl.comm_init_fact(line[:WINDOW])
            if fact is None or fact.pid is None:
                continue
            known = self.learned.get(fact.pid)
            if known is None or fact.nranks > known[1]:
                self.learned[fact.pid] = (fact.rank, fact.nranks)
            self.widest = max(self.widest, fact.nranks)

    def _started(self, window: str) -> None:
        """`started rank 3 (local_rank 3) pid 6` (the lab's launcher), `Launched rank 3 with
        pid 6`: the pid is that rank's, wherever its environment went."""
        if not who.may_name_subject(window):
            return  # no rank named: the writer's prefixes need not be read
        message = window[who.writer(window).start :]
        rank, _local = who.subject(message)
        pid = who.named_pid(message)
        if rank is not None and pid is not None and len(self.started) < MAX_LEARNED:
            self.started[pid] = rank

    def signals(self) -> tuple[Signal, ...]:
        if not self.kept.first and not self.pending and self.ras is None:
            return ()
        self._flush()
        if self.ras is not None:
            for signal in ras_signals(self.ras.report(), self.source):
                self.kept.add(signal)
            self.ras = None
        return tuple(self.kept.all())

    # -- one line ------------------------------------------------------------------------------

    def read(self, line: str) -> None:
        self.line_no += 1
        window = line[:WINDOW]
        if self.ras is not None and self.ras.feed(window):
            return
        if not window.strip():
            return
        indented = window[:1] in (" ", "\t")
        if self.pending and indented:
            piece = who.continued(window)
            if piece is not None:
                self._fill(*piece)
                return
        elif self.pending:
            self._flush()
        low = window.lower()
        triggered = self.hinted = may_say_anything(low)
        if not triggered and not _may_progress(low) and not self.blocks.listing:
            self._quiet(window, low, indented)  # most lines of a log: nothing to say
            return
        found = self._writer(window, indented)
        if self.blocks.listed(window.strip()):
            found = who.Writer()  # the list's own `1: [`, not srun's label
        message = window[found.start :].strip()
        if not message:
            return
        key = (found.rank, found.local, found.host)
        if self._quoted_code(key, message):
            return
        self._line(found, message, line, indented, triggered)

    def _quiet(self, window: str, low: str, indented: bool) -> None:
        """A line that says nothing: it may still be whom the next indented line continues,
        name the rank of the lines under it (torchrun's summary: `  rank : 3 (local_rank:
        3)`), or say which process a launcher started as which rank."""
        if "pid" in low and ("start" in low or "spawn" in low or "launch" in low):
            self._started(window)
        if not indented:
            self.blocks.node = self.blocks.hca = None  # a block ends at a line of its own
            self.previous_line = window
            self.previous = None
        elif "rank" in low:
            self.previous_line = None
            self._remember(who.writer(window), window)

    def _writer(self, window: str, indented: bool) -> who.Writer:
        if indented and self.previous_line is not None:
            # The quiet line above is the one this continues: read its writer now.
            above = who.writer(self.previous_line)
            self.previous_line = None
            if above.rank is not None or above.local is not None or above.host is not None:
                self.previous = (above.rank, above.local, above.host, above.pid)
        elif not indented:
            self.previous_line = None
        return who.writer(window)

    def _line(
        self, found: who.Writer, message: str, line: str, indented: bool, triggered: bool
    ) -> None:
        low = message.lower()
        self.blocks.see(message, indented)
        is_progress, step = progress(message) if _may_progress(low) else (False, None)
        failures = classify(message) if triggered else []
        if self.blocks.node is not None or self.blocks.hca is not None:  # inside a block
            failures += self.blocks.kinds(low, {kind for kind, _, _ in failures})
        failures = self.blocks.adjust(message, low, failures)
        failures = self._data_path(line, low, failures)
        event = self._ras_event(message)
        if triggered and exception_line(message):
            failures = self._exception((found.rank, found.local, found.host), failures)
        if not (is_progress or failures or event):
            self._remember(found, line)
            return
        stripped = line.strip()
        text = stripped[:TEXT_CAP]
        at = line_time(stripped, self.source.collected_at)
        if at is None and is_progress:
            # A bar the terminal ran into the next log line: that line's stamp is the bar's.
            end = bar_end(stripped)
            at = line_time(stripped[end:], self.source.collected_at) if end else None
        made: list[Signal] = []
        for rank, local, node, pid in self._targets(found, message, line, bool(failures)):
            base = dict(rank=rank, text=text, at=at, local=local, pid=pid, line_no=self.line_no)
            if is_progress:
                self.kept.add(Signal("progress", node=node, step=step, **base))
            for kind, code, peer in failures:
                for where in self._nodes(kind, message, node):
                    made.append(Signal(kind, node=where, peer=peer, code=code, **base))
        if event is not None:
            made.append(replace(event, text=text, at=at, line_no=self.line_no))
        self.pending.extend(made)

    def _data_path(self, line: str, low: str, failures: list) -> list:
        """NCCL unwinds an error through the same files (proxy.cc, transport.cc) whether set-up
        or the data path failed. A thread that moved data (an IB completion, NCCL's proxy
        `[Progress Thread]`) is past set-up: its unwinding is no communicator init failure."""
        thread = _nccl_thread(line)
        if thread is None:
            return failures
        moved_data = "[progress thread]" in low or "got completion" in low
        if moved_data and len(self.data_threads) < MAX_LEARNED:
            self.data_threads.add(thread)
        if thread in self.data_threads:
            return [f for f in failures if f[0] != "init"]
        return failures

    def _ras_event(self, message: str) -> Signal | None:
        if "PEER_" not in message:
            return None
        event = event_line(message)
        return event_signal(event, self.source) if event is not None else None

    def _nodes(self, kind: str, message: str, node: str | None) -> list[str | None]:
        """A node's state or an eviction is about the node the line names (one signal per
        node a Slurm list names), else the block's, else the line's own."""
        if kind not in _NODE_KINDS:
            return [node]
        named = nodes.named_nodes(message) or ([self.blocks.node] if self.blocks.node else [])
        return [self._node(name) for name in named] if named else [node]

    def _fill(self, what: str, value: str) -> None:
        """`pid: 694415` / `ip: 10.0.0.3` under the failure line above: whom it was about."""
        filled = []
        for signal in self.pending:
            if what == "pid" and value.isdigit() and len(value) <= 9 and signal.pid is None:
                pid = int(value)
                rank = signal.rank if signal.rank is not None else self._pid_rank(pid)
                signal = replace(signal, pid=pid, rank=rank)
            elif what == "ip" and (signal.node is None or signal.node == self.source.node):
                signal = replace(signal, node=self._node(value))
            filled.append(signal)
        self.pending = filled

    def _flush(self) -> None:
        for signal in self.pending:
            self.kept.add(signal)
        self.pending = []

    def _quoted_code(self, key: tuple, message: str) -> bool:
        """Traceback frames and the source lines they quote say nothing by themselves."""
        if message.startswith("Traceback (most recent call last)"):
            if len(self.tracebacks) < _TRACEBACKS or key in self.tracebacks:
                self.tracebacks[key] = _Traceback()
            return True
        trace = self.tracebacks.get(key)
        if message.startswith('File "'):
            if trace is None and len(self.tracebacks) < _TRACEBACKS:
                trace = self.tracebacks[key] = _Traceback()  # a traceback quoted from its middle
            if trace is not None:
                trace.rendezvous = trace.rendezvous or in_rendezvous(message)
                trace.source_next = True
            return True
        if trace is not None and trace.source_next:
            trace.source_next = False
            trace.rendezvous = trace.rendezvous or in_rendezvous(message)
            return True
        return False

    def _exception(self, key: tuple, failures: list) -> list:
        trace = self.tracebacks.pop(key, None)
        kinds = {kind for kind, _, _ in failures}
        extra = [("exception", None, None)]
        if trace is not None and trace.rendezvous and "rendezvous" not in kinds:
            extra.append(("rendezvous", None, None))
        return extra + failures

    def _remember(self, found: who.Writer, line: str) -> None:
        if found.rank is not None or found.local is not None or found.host is not None:
            self.previous = (found.rank, found.local, found.host, found.pid)
        elif line[:1] not in (" ", "\t"):
            self.previous = None

    # -- who -------------------------------------------------------------------------------------

    def _targets(self, found: who.Writer, message: str, line: str, failure: bool) -> list:
        """Whom the line is about: one (rank, local, node, pid), or one per task srun names."""
        if failure and "srun: error:" in message and found.rank is None:
            tasks = launchers.slurm_exits(message)[:MAX_TASKS]
            if tasks:
                return [(t.rank, None, self._node(t.host), None) for t in tasks]
        return [self._resolve(found, message, line, failure)]

    def _resolve(self, found: who.Writer, message: str, line: str, failure: bool):
        rank, local, host, pid = found.rank, found.local, found.host, found.pid
        if rank is None and local is None and host is None and line[:1] in (" ", "\t"):
            if self.previous is not None:
                rank, local, host, pid = self.previous  # an indented line continues the last
        else:
            self.previous = (rank, local, host, pid)
        if rank is None and local is None and failure:
            rank, local = who.subject(message)
            if rank is None and local is None:
                rank = who.pod_rank(message, self.masters)
        if pid is None and failure:
            pid = who.named_pid(message)
        if host is None and failure:
            host = who.named_host(message)
        if rank is None and pid is not None:
            rank = self._pid_rank(pid)
        if rank is None and local is None:
            rank, local, _ = self._from_file()
        if rank is None and local is not None:
            rank = self._local_rank(local)
        return rank, local, self._node(host), pid

    def _pid_rank(self, pid: int) -> int | None:
        rank = self.source.pid_ranks.get(pid, self.started.get(pid))
        if rank is not None:
            return rank
        learned = self.learned.get(pid)
        if learned is not None and learned[1] == self.widest:
            return learned[0]
        return None

    def _local_rank(self, local: int) -> int | None:
        mapped = self.source.local_ranks.get(local)
        if mapped is not None:
            return mapped
        return local if self.source.single_node is not False else None

    def _node(self, host: str | None) -> str | None:
        if host:
            hosts = self.source.hosts
            mapped = hosts.get(host) or hosts.get(host.split(".", 1)[0])
            if mapped:
                return mapped
            if not self.source.node:
                return host
            return host if host not in ("localhost", "127.0.0.1") else self.source.node
        return self.source.node or self._from_file()[2] or None

    def _from_file(self) -> tuple[int | None, int | None, str | None]:
        """(rank, local rank, pod) the file's path gives, read once."""
        if self._file is None:
            path = self.source.path
            rank, local = who.file_rank(path) if path else (None, None)
            self._file = (rank, local, who.pod_name(path) if path else None)
        return self._file


# NCCL's own prefix, `host:pid:tid [cudaDev] `, wherever a launcher's prefix put it.
_NCCL_THREAD = re.compile(r"(?<![\w.:-])([\w.-]{1,253}):(\d{1,9}):(\d{1,9}) \[\d{1,4}\] ")
# The prefix's tail, `:tid [dev] `: led by a plain character, found at a glance (the whole
# prefix, tried at every word of the line, costs more than the rest of most lines' reading).
_NCCL_THREAD_TAIL = re.compile(r":\d{1,9} \[\d{1,4}\] ")


def _nccl_thread(line: str) -> tuple[str, str, str] | None:
    if _NCCL_THREAD_TAIL.search(line, 0, 300) is None:
        return None
    match = _NCCL_THREAD.search(line, 0, 300)
    return (match.group(1), match.group(2), match.group(3)) if match else None


def _runs(line: str) -> list[str]:
    parts: list[str] = []
    start = 0
    for match in _RUN_ON.finditer(line, 1, WINDOW):
        parts.append(line[start : match.start() + 1])
        start = match.start() + 1
        if len(parts) >= MAX_RUNS:
            break
    parts.append(line[start:])
    return parts


# Every progress form has one: a named counter, a bar's rate, a trainer's dict, an epoch.
_PROGRESS_STEMS = ("step", "iter", "it/s", "s/it", "it [", "{'", "epoch", "batch", "loss")


def _may_progress(low: str) -> bool:
    for stem in _PROGRESS_STEMS:  # noqa: SIM110 (a plain loop: any() of a generator costs more)
        if stem in low:
            return True
    return False


def read_text(text: str, source: LineSource = NO_SOURCE) -> tuple[Signal, ...]:
    """Every signal in `text` (one or several lines of one file)."""
    reader = SignalReader(source)
    reader.read_text(text or "")
    return reader.signals()
