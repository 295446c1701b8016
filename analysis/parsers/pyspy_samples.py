"""`py-spy record --format raw --idle --threads`: where one process spent a few seconds.

Each line is one distinct stack and how many samples caught it:
    thread (4730): MainThread;<module> (train.py:80);all_reduce (torch/.../c10d.py:3252) 93
outermost frame first, innermost last. Without `--threads` the first item is
`process 4730:"python train.py"` and every thread's samples are one. The share of the main
thread's samples spent inside a torch.distributed collective (or a wait on one) is what tells
a straggler: the slow rank rarely waits, the others wait for it most of the time.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from analysis.stacks import COLLECTIVES

# Where a CPU thread waits for a collective it launched asynchronously (NCCL): a Work's
# wait, or a CUDA synchronize before reading a result.
_WAIT_FRAMES = frozenset({"wait", "synchronize", "wait_stream", "_wait_for_work"})
# Lines and frames read from one process: a 2 s window at 50 Hz is at most ~100 stacks a
# thread; a hostile file gets no more than this.
MAX_LINES = 20_000
MAX_FRAMES = 512
MAX_COUNT = 10**7


@dataclass(frozen=True)
class WindowSample:
    """One process's main thread over the sampling window."""

    samples: int
    waiting: int  # samples inside a collective or a wait on one
    busiest: str  # the innermost frame it was caught in most often outside a collective

    @property
    def wait_share(self) -> float:
        return self.waiting / self.samples if self.samples else 0.0


def parse_samples(text: str | None, pid: int) -> tuple[WindowSample | None, list[str]]:
    """The main thread's window (the thread whose id is the pid, else the one named
    MainThread, else the most sampled); None when there is nothing to read."""
    if not text or not text.strip():
        return None, []
    threads: dict[str, list[tuple[list[str], int]]] = {}
    problems: list[str] = []
    unreadable = 0
    for number, line in enumerate(text.splitlines()):
        if number >= MAX_LINES:
            problems.append(f"over {MAX_LINES} stacks: the rest ignored")
            break
        parsed = _line(line)
        if parsed is None:
            unreadable += bool(line.strip())
            continue
        thread, frames, count = parsed
        threads.setdefault(thread, []).append((frames, count))
    if unreadable:
        problems.append(f"{unreadable} lines not in py-spy's raw format")
    main = _main_thread(threads, pid)
    if main is None:
        return None, problems or ["no stack in the samples"]
    return _window(threads[main]), problems


def _line(line: str) -> tuple[str, list[str], int] | None:
    stacks, _, count = line.rpartition(" ")
    if not stacks or not count.isdigit() or len(count) > 8:
        return None
    head, _, rest = stacks.partition(";")
    if not rest:
        return None
    frames = rest.split(";", MAX_FRAMES)[:MAX_FRAMES]
    return head, frames, min(int(count), MAX_COUNT)


def _main_thread(threads: dict[str, list], pid: int) -> str | None:
    if not threads:
        return None
    for head in threads:
        if head.startswith(f"thread ({pid}):") or head.startswith(f"thread ({pid:#x}):"):
            return head
    for head in threads:
        if head.endswith(": MainThread") or head.startswith("process "):
            return head
    return max(threads, key=lambda h: sum(c for _, c in threads[h]))


def _window(stacks: list[tuple[list[str], int]]) -> WindowSample:
    samples = waiting = 0
    outside: Counter[str] = Counter()
    for frames, count in stacks:
        samples += count
        if any(_waits(frame) for frame in frames):
            waiting += count
        else:
            outside[frames[-1]] += count
    busiest = outside.most_common(1)[0][0] if outside else ""
    return WindowSample(samples=samples, waiting=waiting, busiest=busiest)


def _waits(frame: str) -> bool:
    name, _, where = frame.partition(" (")
    name = name.rsplit(".", 1)[-1]
    if name in COLLECTIVES:
        return True
    return name in _WAIT_FRAMES and where.startswith("torch/")
