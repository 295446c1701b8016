"""One pass over one text: every line tied to its rank and node, every signal it states.

`SignalReader` keeps the little state lines need from each other: the pids NCCL's
communicator set-up lines tie to ranks (`comm 0x.. rank 3 nranks 8 ... Init COMPLETE`, read
before anything else so a `host:pid:tid ... NCCL WARN` line above them is placed too), the
writer of the line above (an indented line continues it), each writer's traceback (its
`File "..."` lines and the source lines under them say nothing; the exception line that ends it
does, and an exception raised inside the rendezvous is a rendezvous failure), and an ncclras
report read in the middle of other output.

Bounded: each line is read in its first `WINDOW` characters, the text kept in a signal is
cut at `TEXT_CAP`, and each kind keeps its first `KEEP_FIRST` and latest `KEEP_LAST` signals
(progress its first few and latest `KEEP_PROGRESS`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from analysis.parsers import launchers, nccl
from analysis.parsers.ncclras import RasTextReader, looks_like_ras, parse_json
from analysis.signals import who
from analysis.signals.exceptions import exception_line, in_rendezvous
from analysis.signals.kinds import classify, may_say_anything
from analysis.signals.model import TEXT_CAP, LineSource, Signal
from analysis.signals.progress import progress
from analysis.signals.ras import ras_signals
from analysis.signals.times import line_time

WINDOW = 4096
KEEP_FIRST = 32
KEEP_LAST = 32
KEEP_PROGRESS = 64
MAX_LEARNED = 65_536
MAX_TASKS = 64  # signals one srun line may give, one per task it names
_TRACEBACKS = 256  # writers followed at once through a traceback
NO_SOURCE = LineSource()


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
        self.file_rank, self.file_local = who.file_rank(source.path)
        self.pod = who.pod_name(source.path) if source.path else None
        self.learned: dict[int, tuple[int, int]] = {}  # pid -> (rank, communicator size)
        self.widest = 0
        self.kept = _Kept()
        self.line_no = 0
        self.previous: tuple[int | None, int | None, str | None, int | None] | None = None
        self.tracebacks: dict[tuple, _Traceback] = {}
        self.ras: RasTextReader | None = None

    # -- whole texts ---------------------------------------------------------------------------

    def read_text(self, text: str) -> None:
        if looks_like_ras(text):
            brace = text.find("{")
            if brace >= 0 and '"communicators"' in text[brace : brace + 100_000]:
                for signal in ras_signals(parse_json(text[brace:]), self.source):
                    self.kept.add(signal)
                return
            self.ras = RasTextReader()
        if " nranks " in text:
            self.learn(text)
        for line in text.splitlines():
            self.read(line)

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

    def signals(self) -> tuple[Signal, ...]:
        if self.ras is not None:
            for signal in ras_signals(self.ras.report(), self.source):
                self.kept.add(signal)
            self.ras = None
        return tuple(self.kept.all())

    # -- one line ------------------------------------------------------------------------------

    def read(self, line: str) -> None:
        self.line_no += 1
        if self.ras is not None and self.ras.feed(line[:WINDOW]):
            return
        stripped = line.strip()
        if not stripped:
            return
        window = line[:WINDOW]
        found = who.writer(window)
        message = window[found.start :].strip()
        if not message:
            return
        key = (found.rank, found.local, found.host)
        if self._quoted_code(key, message):
            return
        low = message.lower()
        is_progress, step = progress(message) if _may_progress(low) else (False, None)
        failures = classify(message) if may_say_anything(low) else []
        exception = exception_line(message)
        if exception:
            failures = self._exception(key, failures)
        if not (is_progress or failures):
            self._remember(found, line)
            return
        text = stripped[:TEXT_CAP]
        at = line_time(stripped, self.source.collected_at)
        for rank, local, node, pid in self._targets(found, message, line, bool(failures)):
            base = dict(
                rank=rank, node=node, text=text, at=at, local=local, pid=pid, line_no=self.line_no
            )
            if is_progress:
                self.kept.add(Signal("progress", step=step, **base))
            for kind, code, peer in failures:
                self.kept.add(Signal(kind, peer=peer, code=code, **base))

    def _quoted_code(self, key: tuple, message: str) -> bool:
        """Traceback frames and the source lines they quote say nothing by themselves."""
        if message.startswith("Traceback (most recent call last)"):
            if len(self.tracebacks) < _TRACEBACKS or key in self.tracebacks:
                self.tracebacks[key] = _Traceback()
            return True
        trace = self.tracebacks.get(key)
        if trace is None:
            return False
        if message.startswith('File "'):
            trace.rendezvous = trace.rendezvous or in_rendezvous(message)
            trace.source_next = True
            return True
        if trace.source_next:
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
        if pid is None and failure:
            pid = who.named_pid(message)
        if host is None and failure:
            host = who.named_host(message)
        if rank is None and pid is not None:
            rank = self._pid_rank(pid)
        if rank is None and local is None:
            rank, local = self.file_rank, self.file_local
        if rank is None and local is not None:
            rank = self._local_rank(local)
        return rank, local, self._node(host), pid

    def _pid_rank(self, pid: int) -> int | None:
        rank = self.source.pid_ranks.get(pid)
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
        return self.source.node or self.pod or None


_PROGRESS_STEMS = ("step", "iter", "/", "it [", "{'loss'", "{'train_loss'", "{'eval_loss'")


def _may_progress(low: str) -> bool:
    return any(stem in low for stem in _PROGRESS_STEMS)


def read_text(text: str, source: LineSource = NO_SOURCE) -> tuple[Signal, ...]:
    """Every signal in `text` (one or several lines of one file)."""
    reader = SignalReader(source)
    reader.read_text(text or "")
    return reader.signals()
