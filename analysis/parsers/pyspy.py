"""`py-spy dump` output, JSON (`--json`) or text. Frames are kept innermost first, as py-spy
prints them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass


# Not frozen (a frozen dataclass pays an object.__setattr__ call per field, and a snapshot holds
# tens of thousands of frames); unsafe_hash keeps frames hashable. Nothing assigns to a frame.
@dataclass(slots=True, unsafe_hash=True)
class Frame:
    name: str
    filename: str
    line: int | None

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.name} ({self.filename})"
        return f"{self.name} ({self.filename}:{self.line})"


class PyThread:
    """One thread of a dump. JSON frames are turned into `Frame`s on first use: the analysis
    reads the main thread's, and the other threads of 4,096 ranks need not be built."""

    __slots__ = ("_frames", "_raw", "active", "name", "thread_id")

    def __init__(
        self, thread_id: str, name: str, active: bool | None, raw_frames: list | None = None
    ) -> None:
        self.thread_id = thread_id
        self.name = name
        self.active = active
        self._raw = raw_frames
        self._frames: list[Frame] | None = None if raw_frames is not None else []

    @property
    def frames(self) -> list[Frame]:
        if self._frames is None:
            self._frames = [_json_frame(raw) for raw in self._raw or () if type(raw) is dict]
            self._raw = None
        return self._frames

    def __repr__(self) -> str:
        return f"PyThread({self.thread_id!r}, {self.name!r}, {self.active!r})"


_THREAD = re.compile(r'^Thread (?P<id>\S+)(?: \((?P<status>[^)]*)\))?(?:: "(?P<name>[^"]*)")?\s*$')
# A text frame is `    <name> (<file>[:<line>])`. Read with str methods, not a regex: the
# regex this replaces (`^\s+(.+?) \(([^()]*?)(?::(\d+))?\)\s*$`) backtracked quadratically on a
# line of whitespace (20 KB: 4 s).
_TEXT_CAP = 1024


def _text_frame(line: str) -> Frame | None:
    if not line[:1].isspace():
        return None
    text = line.strip()
    opening = text.rfind("(")
    if not text.endswith(")") or opening < 2 or text[opening - 1] != " ":
        return None
    inner = text[opening + 1 : -1]
    if ")" in inner:
        return None
    file, colon, digits = inner.rpartition(":")
    number = None
    if colon and digits.isdecimal() and len(digits) <= 9:
        number = int(digits)
    else:
        file = inner
    name = text[: opening - 1]
    return Frame(name[:_TEXT_CAP], file[:_TEXT_CAP], number)


def parse_pyspy(text: str | None) -> tuple[list[PyThread], list[str]]:
    if not text or not text.strip():
        return [], ["empty py-spy output"]
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            return _parse_json(stripped)
        except RecursionError:  # nesting no py-spy writes; json and repr give up on it
            return [], ["py-spy JSON nested too deeply to read"]
    return _parse_text(text)


# Every rank of a job runs the same files: remember the short spelling of recent file names.
_SHORT_CACHE: dict[str, str] = {}
_SHORT_CACHE_ENTRIES = 4096
_SHORT_CACHE_KEY_CHARS = 1024


def _short_cached(filename: str) -> str:
    short = _SHORT_CACHE.get(filename)
    if short is None:
        short = _short(filename)
        if len(filename) <= _SHORT_CACHE_KEY_CHARS:
            if len(_SHORT_CACHE) >= _SHORT_CACHE_ENTRIES:
                _SHORT_CACHE.clear()
            _SHORT_CACHE[filename] = short
    return short


def _short(filename: str) -> str:
    # Keep the tail that identifies the module (torch/distributed/x.py) without the venv prefix.
    for marker in ("site-packages/", "dist-packages/", "lib/python"):
        cut = filename.rfind(marker)
        if cut >= 0:
            tail = filename[cut + len(marker) :]
            if marker == "lib/python":
                tail = tail.split("/", 1)[-1]
            return tail
    return filename.rsplit("/", 1)[-1]


def _parse_json(text: str) -> tuple[list[PyThread], list[str]]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], [f"py-spy JSON not readable: {exc}"]
    if not isinstance(data, list):
        return [], ["py-spy JSON is not a list of threads"]
    threads: list[PyThread] = []
    problems: list[str] = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("frames", []), list):
            problems.append("py-spy JSON thread entry not understood")
            continue
        active = item.get("active")
        threads.append(
            PyThread(
                thread_id=str(item.get("thread_id", "")),
                name=str(item.get("thread_name") or ""),
                active=active if isinstance(active, bool) else None,
                raw_frames=item.get("frames") or [],
            )
        )
    return threads, problems


def _json_frame(raw: dict) -> Frame:
    full = raw.get("filename")
    filename = raw.get("short_filename")
    # py-spy's short_filename is the bare file name; prefer the module path from the full one.
    if not filename or not isinstance(filename, str) or (full and "/" not in filename):
        filename = _short_cached(str(full or "?"))
    number = raw.get("line")
    return Frame(str(raw.get("name") or "?"), filename, number if isinstance(number, int) else None)


def _parse_text(text: str) -> tuple[list[PyThread], list[str]]:
    threads: list[PyThread] = []
    problems: list[str] = []
    current: PyThread | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _THREAD.match(line)
        if match:
            status = match.group("status") or ""
            current = PyThread(
                thread_id=match.group("id"),
                name=match.group("name") or "",
                active=("active" in status) if status else None,
            )
            threads.append(current)
            continue
        if line.startswith(("Process ", "Python v")):
            continue
        frame = _text_frame(line)
        if frame and current is not None:
            current.frames.append(frame)
            continue
        if (
            line.startswith(" ")
            and current is not None
            and line.strip().startswith(("Arguments", "Locals"))
        ):
            continue
        if line.startswith("  ") and current is not None:
            continue  # locals printed by --locals
        problems.append(f"py-spy line not understood: {line.strip()[:120]!r}")
    if not threads:
        problems.append("no threads found in py-spy output")
    return threads, problems


# A main thread that only serves a framework's task loop, while the training runs in a thread
# of its own: a Ray worker process (an actor's methods run on the main thread's loop; Ray
# Train runs the training function in its `TrainingThread`).
_SERVING_LOOPS = (("main_loop", "ray/_private/worker.py"),)


def _serves_a_loop(thread: PyThread) -> bool:
    inner = thread.frames[0]
    function = inner.name.rsplit(".", 1)[-1]  # py-spy names a method Class.method
    return any(function == name and inner.filename.endswith(path) for name, path in _SERVING_LOOPS)


def main_thread(threads: list[PyThread]) -> PyThread | None:
    """The thread that runs the training loop: MainThread, unless it only serves a
    framework's task loop (then the training thread: named so, or the deepest other one),
    else the deepest active one."""
    main = next((t for t in threads if t.name == "MainThread" and t.frames), None)
    if main is not None and not _serves_a_loop(main):
        return main
    others = [t for t in threads if t.frames and t is not main]
    if not others:
        return main
    training = [t for t in others if t.name.startswith("TrainingThread")]
    return max(training or others, key=lambda t: (bool(t.active), len(t.frames)))
