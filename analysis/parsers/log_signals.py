"""What the line reader (analysis.signals) adds to one log's facts, in the same pass.

`parse_log` offers every line its specific readers do not take on the fast path to a
`SignalReader`, and `apply_signals` then lets the signals fill what those readers left empty:
- a departure line no launcher reader knows (`rank 3 (pid 6) exited with exitcode 137
  (signal 9)`, `Worker group FAILED`, a kill, a segfault) becomes an exit of the rank, pid or
  local rank it names, with its code in the launchers' convention;
- a rendezvous or communicator set-up failure in any wording (a c10d store `wait` timeout
  inside a launcher's traceback, NCCL's internal error from its socket set-up, its error
  unwinding through init.cc) joins the rendezvous errors the verdict reads; a store the
  others lost because its server died (connection closed or reset) does not: that server's
  rank left;
- an error or NCCL WARN line whose writer only a pid names (`host:pid:tid`) gets that pid's
  rank.
Every list filled stays within the bounds of `logs.py`.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.parsers.launchers import ExitFact
from analysis.signals import LineSource, Signal, SignalReader
from analysis.signals.kinds import exit_status

DEPARTURES = frozenset({"killed", "segfault", "exit"})
SETUP = frozenset({"rendezvous", "init"})
_MAX_ADDED = 64  # exits or rendezvous lines one log may add
_MAX_STARTED = 65_536


def signal_reader(path: str, source: LineSource | None) -> SignalReader:
    return SignalReader(source if source is not None else LineSource(path=path))


def apply_started(facts, reader: SignalReader) -> bool:
    """A launcher's start lines tie pids to ranks (the lab's `started rank 3 ... pid 6`): the
    log's pid map gets them, and the log said something after all."""
    for pid, rank in list(reader.started.items())[:_MAX_STARTED]:
        if pid not in facts.pid_ranks:
            facts.pid_ranks[pid] = rank
    # NCCL's communicator set-up lines (`host:pid:tid ... rank R nranks N`) tie a pid to its
    # rank too: in the job-wide (widest) communicator the rank is the global one.
    for pid, (rank, nranks) in list(reader.learned.items())[:_MAX_STARTED]:
        if nranks == reader.widest and pid not in facts.pid_ranks:
            facts.pid_ranks[pid] = rank
    return bool(reader.started)


def apply_signals(facts, signals: tuple[Signal, ...], keep, line_fact) -> None:
    """Fill `facts` (a LogFacts) from the log's signals; `keep` is logs.py's bounded append,
    `line_fact` its LineFact."""
    facts.signals = signals
    if not signals:
        return
    known_exits = {fact.line.strip()[:1000] for fact in facts.exits}
    # Whom the launcher readers already saw leave: another line about them adds nothing.
    gone = {("pid", f.pid) for f in facts.exits if f.pid is not None}
    gone |= {("rank", f.rank) for f in facts.exits if f.rank is not None}
    gone |= {("local", f.local_rank) for f in facts.exits if f.local_rank is not None}
    known_setup = {fact.line.strip()[:1000] for fact in facts.rendezvous_errors}
    by_line = _kinds_by_line(signals)
    added_exits = added_setup = 0
    for text, line_signals in by_line.items():
        kinds = {s.kind for s in line_signals}
        first = line_signals[0]
        departs = kinds & DEPARTURES and text not in known_exits and not _seen(first, gone)
        if departs and added_exits < _MAX_ADDED and _place_exit(facts, first, text):
            added_exits += 1
            known_exits.add(text)
        setup = kinds & SETUP and text not in known_setup
        setup = setup and ("connection" not in kinds or _establishing(text))
        if setup and added_setup < _MAX_ADDED:
            local = first.local if first.rank is None else None
            keep(facts.rendezvous_errors, line_fact(first.rank, local, text))
            added_setup += 1
            known_setup.add(text)
    _fill_writers(facts, by_line)


# A connection being made, not one lost: `Connect to 10.0.0.2<45763> failed`, c10d's `trying to
# connect to (host, port)`, NCCL's socket connect calls. Set-up failing, even though the line
# also speaks of a connection.
_ESTABLISHING = ("connect to ", "socketstartconnect", "socketpollconnect", "bootstrap")


def _establishing(text: str) -> bool:
    low = text.lower()
    return any(stem in low for stem in _ESTABLISHING)


def _kinds_by_line(signals: tuple[Signal, ...]) -> dict[str, list[Signal]]:
    by_line: dict[str, list[Signal]] = {}
    for signal in signals:
        if signal.kind != "progress":
            by_line.setdefault(signal.text, []).append(signal)
    return by_line


def _seen(signal: Signal, gone: set[tuple[str, int]]) -> bool:
    return (
        ("pid", signal.pid) in gone
        or ("rank", signal.rank) in gone
        or (signal.rank is None and ("local", signal.local) in gone)
    )


def _place_exit(facts, signal: Signal, text: str) -> bool:
    if signal.rank is None and signal.local is None and signal.pid is None:
        return False  # nobody to tie it to: the launcher readers' node-level exits cover it
    facts.exits.append(
        ExitFact(
            rank=signal.rank,
            local_rank=signal.local if signal.rank is None else None,
            pid=signal.pid,
            exit_code=exit_status(text),
            line=text,
            launcher="log",
            at=signal.at,
        )
    )
    return True


def _fill_writers(facts, by_line: dict[str, list[Signal]]) -> None:
    """Error and NCCL WARN lines that only a pid ties to a rank: the signal of that line did."""
    for bucket in (facts.errors, facts.nccl_warn):
        for index, fact in enumerate(bucket):
            if fact.rank is not None or fact.local_rank is not None:
                continue
            placed = by_line.get(fact.line.strip()[:1000])
            if placed and placed[0].rank is not None:
                bucket[index] = replace(fact, rank=placed[0].rank)
