"""PyTorch flight-recorder dumps, read without ever executing anything from them.

torch writes a pickle by default (`_dump_fr_trace`) or JSON (`_dump_fr_trace_json`): `version`,
`pg_config` (each group's name, description and member ranks), `pg_status` (per group, keyed by
the rank's own count of its groups, the last enqueued / started / completed sequence id) and
`entries`, one per collective or point-to-point op the rank issued, oldest first. A pickle is
read by `analysis.parsers.safe_pickle` (no code runs, memory bounded); every field copied out
is bounded too: text cut at MAX_TEXT_CHARS, shapes and dtypes kept only when they are small
plain lists, numbers only when they fit 64 bits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from analysis.parsers.safe_pickle import (  # noqa: F401 - re-exported: the dump's reader API
    MAX_DUMP_BYTES,
    MAX_MEMO_INDEX,
    MAX_UNPICKLED_BYTES,
    UnsafePickleError,
    safe_loads,
)

# Anything copied out of a dump into the diagnosis is cut at this many characters; containers
# are rendered with the same budget, so shared references (a list of itself twice, 30 deep:
# 2**30 leaves from 400 bytes) never expand.
MAX_TEXT_CHARS = 512
MAX_RENDER_DEPTH = 32


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which made building
# the entries of 4,096 dumps cost more than unpickling them. Nothing assigns to an entry;
# unsafe_hash keeps entries hashable as they were.
@dataclass(slots=True, unsafe_hash=True)
class FrEntry:
    pg: str
    seq: int
    op: str
    input_sizes: str
    output_sizes: str
    state: str
    completed: bool
    is_p2p: bool
    time_created_ns: int | None
    # The frames torch recorded with the entry; read only for the entry that gets reported.
    raw_frames: list = field(default_factory=list, compare=False, repr=False)

    @property
    def frame(self) -> str:
        """The user's call site that issued the collective, "" when no stack was recorded."""
        return _call_site(self.raw_frames)

    @property
    def signature(self) -> str:
        """What all ranks must agree on for this collective: op and sizes."""
        return f"{self.op} in={self.input_sizes} out={self.output_sizes}"


@dataclass
class FrDump:
    path: str
    rank: int | None
    version: str = ""
    entries: list[FrEntry] = field(default_factory=list)
    pg_ranks: dict[str, list[int]] = field(default_factory=dict)
    last_completed: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


_ASCII_DIGITS = "0123456789"
# torch's ints are 64-bit; a bigger one in a dump is hostile (and str() of a 5,000-digit int
# raises), so it counts as absent.
_INT_LIMIT = 1 << 63


def rank_from_dump_path(path: str) -> int | None:
    """The rank torch appends to the dump's name (trace_rank_3, trace_rank_3.json): ASCII digits
    only, at most nine of them."""
    name = path.rsplit("/", 1)[-1]
    for suffix in (".json", ".pkl", ".pickle"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    digits = len(name) - len(name.rstrip(_ASCII_DIGITS))
    return int(name[-digits:]) if 0 < digits <= 9 else None


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and -_INT_LIMIT < value < _INT_LIMIT:
        return value
    return None


def parse_flight_recorder(path: str, data: bytes | None) -> FrDump:
    dump = FrDump(path=path, rank=rank_from_dump_path(path))
    if not data:
        dump.problems.append(f"{path}: empty flight-recorder dump")
        return dump
    try:
        stripped = data.lstrip()
        if stripped[:1] == b"{":
            raw = json.loads(data.decode("utf-8", errors="replace"))
        else:
            raw = safe_loads(data)
    except UnsafePickleError as exc:
        dump.problems.append(f"{path}: {exc}")
        return dump
    except Exception as exc:  # any decoding failure is a problem to report
        dump.problems.append(f"{path}: not a flight-recorder dump ({type(exc).__name__}: {exc})")
        return dump
    if not isinstance(raw, dict):
        dump.problems.append(f"{path}: dump is a {type(raw).__name__}, expected a dict")
        return dump
    if "entries" not in raw:
        dump.problems.append(f"{path}: no `entries`: not a flight-recorder dump")
        return dump
    try:
        _read_dump(dump, raw)
    # A hostile shape, not torch's (ValueError/OverflowError: numbers no dump holds).
    except (AttributeError, TypeError, ValueError, OverflowError, RecursionError) as exc:
        dump.entries, dump.pg_ranks, dump.last_completed = [], {}, {}
        dump.problems.append(f"{path}: dump not understood ({type(exc).__name__}: {exc})")
    return dump


def _read_dump(dump: FrDump, raw: dict) -> None:
    dump.version = _text(raw.get("version", ""))
    rank = _int(raw.get("rank"))
    if rank is not None and 0 <= rank < 1 << 31:
        dump.rank = rank
    for pg_name, config in (raw.get("pg_config") or {}).items():
        ranks = config.get("ranks") if isinstance(config, dict) else None
        parsed = _rank_list(ranks)
        if parsed is not None:
            dump.pg_ranks[_text(pg_name)] = parsed
    for pg_id, status in (raw.get("pg_status") or {}).items():
        last = _int(status.get("last_completed_collective")) if isinstance(status, dict) else None
        if last is not None:
            dump.last_completed[_text(pg_id)] = last
    parsed = list(map(_entry, raw.get("entries") or []))
    dump.entries = [entry for entry in parsed if entry is not None]
    skipped = len(parsed) - len(dump.entries)
    if skipped:
        dump.problems.append(f"{dump.path}: {skipped} entries not understood")


# Every dump of a job repeats the same pg_config: remember recent `ranks` strings read.
_RANKS_CACHE: dict[str, list[int] | None] = {}
_RANKS_CACHE_ENTRIES = 256  # worst case, hostile strings at the cap: ~13 MB
_RANKS_CACHE_KEY_CHARS = 4096


def _rank_list(value: Any) -> list[int] | None:
    if isinstance(value, list):
        return [v for v in value if _int(v) is not None]
    if not isinstance(value, str):
        return None
    if value in _RANKS_CACHE:
        cached = _RANKS_CACHE[value]
        return None if cached is None else list(cached)
    parsed = _rank_list_from_json(value)
    if len(value) <= _RANKS_CACHE_KEY_CHARS:
        if len(_RANKS_CACHE) >= _RANKS_CACHE_ENTRIES:
            _RANKS_CACHE.clear()
        _RANKS_CACHE[value] = None if parsed is None else list(parsed)
    return parsed


def _rank_list_from_json(value: str) -> list[int] | None:
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return [v for v in parsed if _int(v) is not None] if isinstance(parsed, list) else None


def _call_site(frames: list) -> str:
    """The first recorded frame outside torch: the user's line that issued the collective."""
    usable = [f for f in frames if isinstance(f, dict)]
    chosen = next((f for f in usable if "/torch/" not in _text(f.get("filename", ""))), None)
    chosen = chosen or (usable[0] if usable else None)
    if chosen is None:
        return ""
    filename = _text(chosen.get("filename", "?")).rsplit("/", 1)[-1]
    return _cut(f"{_text(chosen.get('name', '?'))} ({filename}:{_text(chosen.get('line', '?'))})")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"


def _text(value: Any) -> str:
    """A field of the dump as text of at most MAX_TEXT_CHARS: strings cut, containers rendered
    within the same budget (never a whole repr), huge ints by their size."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return str(value)
    if isinstance(value, int):
        return str(value) if -(10**30) < value < 10**30 else f"<int of {value.bit_length()} bits>"
    return _sizes(value)


def _sizes(value: Any) -> str:
    """Pickle and JSON dumps both give nested lists of ints; one compact spelling for both
    ([[8,16],[8]]), rendered within MAX_TEXT_CHARS and MAX_RENDER_DEPTH so a structure of shared
    references renders its first few hundred characters, not its expansion."""
    if _plain_sizes(value):  # what torch writes: repr() is bounded and much faster
        text = repr(value).replace(" ", "")
        return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "…"
    out: list[str] = []
    budget = [MAX_TEXT_CHARS]
    _render(value, out, budget, MAX_RENDER_DEPTH)
    text = "".join(out)
    return text if budget[0] > 0 else text[: MAX_TEXT_CHARS - 1] + "…"


_SMALL_INT = 1 << 62


def _plain_sizes(value: Any) -> bool:
    """None, or a list of at most 32 lists of at most 32 64-bit ints: repr() of it is at most
    ~43 KB, so it is safe to call before cutting."""
    if value is None:
        return True
    if type(value) is not list or len(value) > 32:
        return False
    for item in value:
        if type(item) is not list or len(item) > 32:
            return False
        for number in item:
            if type(number) is not int or not -_SMALL_INT < number < _SMALL_INT:
                return False
    return True


def _render(value: Any, out: list[str], budget: list[int], depth: int) -> None:
    if budget[0] <= 0:
        return
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            piece = "[…]"
        else:
            _render_items(value, out, budget, depth)
            return
    elif isinstance(value, dict):
        piece = "{…}"
    elif isinstance(value, str):
        piece = repr(value[: budget[0]])
    elif isinstance(value, (bytes, bytearray)):
        piece = repr(bytes(value[: budget[0]]))
    elif isinstance(value, int) and not isinstance(value, bool):
        piece = _text(value)
    else:
        piece = repr(value) if isinstance(value, (bool, float)) or value is None else "?"
    out.append(piece)
    budget[0] -= len(piece)


def _render_items(value: list | tuple, out: list[str], budget: list[int], depth: int) -> None:
    opening, closing = ("[", "]") if isinstance(value, list) else ("(", ")")
    out.append(opening)
    budget[0] -= 1
    for index, item in enumerate(value):
        if budget[0] <= 0:
            return
        if index:
            out.append(",")
            budget[0] -= 1
        _render(item, out, budget, depth - 1)
    if isinstance(value, tuple) and len(value) == 1:
        out.append(",")
        budget[0] -= 1
    out.append(closing)
    budget[0] -= 1


def _entry(item: Any) -> FrEntry | None:
    if not isinstance(item, dict):
        return None
    get = item.get
    seq = _int(get("collective_seq_id"))
    if seq is None:
        return None
    is_p2p = bool(get("is_p2p"))
    if is_p2p:
        p2p_seq = _int(get("p2p_seq_id"))
        seq = seq if p2p_seq is None else p2p_seq
    # Pickle gives process_group as a tuple (id, name), JSON a list; keep the id, which
    # pg_status uses too.
    group = get("process_group")
    if isinstance(group, (tuple, list)) and group:
        pg = _text(group[0])
    else:
        pg = _text(group if group is not None else get("pg_id"))
    state = _text(get("state", ""))
    created = get("time_created_ns")
    frames = get("frames")
    return FrEntry(
        pg,
        seq,
        _text(get("profiling_name", "?")),
        _sizes(get("input_sizes")),
        _sizes(get("output_sizes")),
        state,
        # NCCL marks state=completed; gloo entries stay "scheduled" and are retired once done.
        state == "completed" or bool(get("retired")),
        is_p2p,
        _int(created),
        frames if isinstance(frames, list) else [],
    )
