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
from operator import itemgetter
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
    pg: str  # the group's name (process_group[0]): the same on every member
    seq: int  # collective_seq_id; p2p_seq_id for a point-to-point op
    op: str  # profiling_name, e.g. "nccl:all_reduce", "nccl:send 0->1"
    input_sizes: str  # as text, for people: [[8,16],[8]]
    output_sizes: str
    state: str  # scheduled | started | completed (gloo entries stay "scheduled")
    completed: bool  # state completed, or retired (gloo retires what it finished)
    is_p2p: bool
    started: bool = False  # the device started it (state started or completed)
    pg_desc: str = ""
    # Shapes as numbers, when they are the small plain lists torch writes (None otherwise).
    in_shapes: tuple | None = field(default=None, compare=False, repr=False)
    out_shapes: tuple | None = field(default=None, compare=False, repr=False)
    in_dtypes: tuple[str, ...] = ()
    out_dtypes: tuple[str, ...] = ()
    # The frames torch recorded with the entry; read only for the entry that gets reported.
    raw_frames: list = field(default_factory=list, compare=False, repr=False)

    @property
    def frame(self) -> str:
        """The user's call site that issued the collective, "" when no stack was recorded."""
        return _call_site(self.raw_frames)

    @property
    def kind(self) -> str:
        """The op without its backend and peers: "nccl:send 0->1" -> "send"."""
        name = self.op.split(":", 1)[-1]
        return name.split(" ", 1)[0]

    @property
    def peers(self) -> tuple[int, int] | None:
        """(source, destination) as ranks of the group, for a send or recv."""
        name = self.op.split(":", 1)[-1]
        _, _, meta = name.partition(" ")
        for arrow, flip in (("->", False), ("<-", True)):
            left, found, right = meta.partition(arrow)
            if found and left.isdigit() and right.isdigit() and len(left + right) <= 18:
                a, b = int(left), int(right)
                return (b, a) if flip else (a, b)
        return None

    @property
    def signature(self) -> str:
        """What all ranks must agree on for this collective: op, sizes, dtypes."""
        text = f"{self.op} in={self.input_sizes} out={self.output_sizes}"
        dtypes = sorted(set(self.in_dtypes) | set(self.out_dtypes))
        return f"{text} dtype={'/'.join(dtypes)}" if dtypes else text


@dataclass
class FrDump:
    path: str
    rank: int | None
    version: str = ""
    entries: list[FrEntry] = field(default_factory=list)
    # Each entry's time_created_ns, in step with `entries` (change both together): kept apart
    # so that entries alike but for their time are one object across a node's dumps.
    created_ns: list[int | None] = field(default_factory=list)
    # group name -> its members, sorted, as this rank's pg_config lists them (gloo leaves them
    # empty). Tuples: every dump of a job shares the same ones (see _rank_list).
    pg_ranks: dict[str, tuple[int, ...]] = field(default_factory=dict)
    pg_desc: dict[str, str] = field(default_factory=dict)
    # pg_status: the rank's own group id -> last completed sequence id.
    last_completed: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # The record id (the rank's own count of its entries) of the oldest entry it kept.
    first_record_id: int | None = None

    @property
    def wrapped(self) -> bool:
        """The ring buffer dropped older entries: the oldest kept is not the rank's first."""
        return self.first_record_id is not None and self.first_record_id > 0


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
    """A 64-bit int, or its decimal spelling (torch's JSON dumps write pg_status as strings)."""
    if type(value) is int:
        return value if -_INT_LIMIT < value < _INT_LIMIT else None
    if isinstance(value, str) and len(value) <= 19:
        digits = value[1:] if value[:1] == "-" else value
        if digits.isascii() and digits.isdigit():
            return int(value)
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
        dump.entries, dump.pg_ranks, dump.pg_desc, dump.last_completed = [], {}, {}, {}
        dump.created_ns = []
        dump.problems.append(f"{path}: dump not understood ({type(exc).__name__}: {exc})")
    return dump


def _read_dump(dump: FrDump, raw: dict) -> None:
    dump.version = _text(raw.get("version", ""))
    rank = _int(raw.get("rank"))
    if rank is not None and 0 <= rank < 1 << 31:
        dump.rank = rank
    for pg_name, config in (raw.get("pg_config") or {}).items():
        if not isinstance(config, dict):
            continue
        parsed = _rank_list(config.get("ranks"))
        if parsed is not None:
            dump.pg_ranks[_text(pg_name)] = parsed
            dump.pg_desc[_text(pg_name)] = _text(config.get("desc", ""))
    for pg_id, status in (raw.get("pg_status") or {}).items():
        last = _int(status.get("last_completed_collective")) if isinstance(status, dict) else None
        if last is not None:
            dump.last_completed[_text(pg_id)] = last
    items = raw.get("entries") or []
    if isinstance(items, list) and items and isinstance(items[0], dict):
        dump.first_record_id = _int(items[0].get("record_id"))
    parsed = list(map(_entry, items))
    kept = list(filter(None, parsed))
    dump.entries = list(map(itemgetter(0), kept))
    dump.created_ns = list(map(itemgetter(1), kept))
    skipped = len(parsed) - len(kept)
    if skipped:
        dump.problems.append(f"{dump.path}: {skipped} entries not understood")


# Every dump of a job repeats the same pg_config, whose default group lists the whole world (a
# 4,096-rank job: 24 KB of "[0, 1, ...]" in every dump): remember the strings read, within a
# budget of characters so hostile ones cannot grow it, and hand out one shared tuple. Found by
# their length and ends, then compared whole: hashing each dump's copy of the list cost what
# comparing it does several times over, and grew with the world (0.16 ms a dump at 96,000).
_RANKS_CACHE: dict[tuple[int, str, str], list[tuple[str, tuple[int, ...] | None]]] = {}
_RANKS_CACHE_ENTRIES = 65_536  # a job of 4,096 ranks has a few thousand groups
_RANKS_CACHE_CHARS = 8 * 1024 * 1024
_RANKS_ALIKE = 4  # strings kept under one key (the same length and ends)
_ranks_cached_chars = [0]
_RANK_LIMIT = 1 << 31
_ENDS = 48


def _rank_list(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list):
        return _members(value)
    if not isinstance(value, str):
        return None
    key = (len(value), value[:_ENDS], value[-_ENDS:])
    alike = _RANKS_CACHE.get(key)
    for known, parsed in alike or ():
        if known == value:
            return parsed
    parsed = _rank_list_from_json(value)
    if len(value) <= _RANKS_CACHE_CHARS:
        full = len(_RANKS_CACHE) >= _RANKS_CACHE_ENTRIES
        if full or _ranks_cached_chars[0] + len(value) > _RANKS_CACHE_CHARS:
            _RANKS_CACHE.clear()
            _ranks_cached_chars[0] = 0
            alike = None
        if alike is None:
            alike = _RANKS_CACHE[key] = []
        elif len(alike) >= _RANKS_ALIKE:
            _ranks_cached_chars[0] -= len(alike.pop(0)[0])
        alike.append((value, parsed))
        _ranks_cached_chars[0] += len(value)
    return parsed


def _rank_list_from_json(value: str) -> tuple[int, ...] | None:
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return _members(parsed) if isinstance(parsed, list) else None


def _members(values: list) -> tuple[int, ...]:
    """Ranks, sorted, each once; anything that is not a rank number is dropped."""
    ranks = {n for n in map(_int, values) if n is not None and 0 <= n < _RANK_LIMIT}
    return tuple(sorted(ranks))


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


def _entry(item: Any) -> tuple[FrEntry, int | None] | None:
    # Runs for every entry of every dump: the common cases of _int, _short, _sizes_and_shapes
    # and _dtypes are inlined (each falls back to the function for anything else).
    if not isinstance(item, dict):
        return None
    get = item.get
    seq = get("collective_seq_id")
    if type(seq) is not int or not -_INT_LIMIT < seq < _INT_LIMIT:
        seq = _int(seq)
        if seq is None:
            return None
    is_p2p = bool(get("is_p2p"))
    if is_p2p:
        p2p_seq = _int(get("p2p_seq_id"))
        seq = seq if p2p_seq is None else p2p_seq
    # Pickle gives process_group as a tuple (name, desc), JSON a list: the name is the same on
    # every member; pg_id is each rank's own count of its groups.
    group = get("process_group")
    desc = ""
    if isinstance(group, (tuple, list)) and group:
        pg = _short(group[0])
        desc = _short(group[1]) if len(group) > 1 else ""
    else:
        pg = _text(group if group is not None else get("pg_id"))
    state = get("state", "")
    if type(state) is not str or len(state) > MAX_TEXT_CHARS:
        state = _text(state)
    op = get("profiling_name", "?")
    if type(op) is not str or len(op) > MAX_TEXT_CHARS:
        op = _text(op)
    frames = get("frames")
    created = get("time_created_ns")
    if type(created) is not int or not -_INT_LIMIT < created < _INT_LIMIT:
        created = _int(created)
    in_text, in_shapes = _known_sizes(get("input_sizes"))
    out_text, out_shapes = _known_sizes(get("output_sizes"))
    entry = FrEntry(
        pg,
        seq,
        op,
        in_text,
        out_text,
        state,
        # NCCL marks state=completed; gloo entries stay "scheduled" and are retired once done.
        state == "completed" or bool(get("retired")),
        is_p2p,
        state == "started" or state == "completed",
        desc,
        in_shapes,
        out_shapes,
        _known_dtypes(get("input_dtypes")),
        _known_dtypes(get("output_dtypes")),
        frames if isinstance(frames, list) else [],
    )
    return entry, created


def _short(value: Any) -> str:
    """_text, with the common case (a short string) first."""
    if type(value) is str and len(value) <= MAX_TEXT_CHARS:
        return value
    return _text(value)


# Shapes seen -> their text and one shared copy: a job's entries repeat a few shapes thousands
# of times. A shape is looked up by value, so (True,) or (1.0,) finds (1,): the same numbers.
_SHAPES_TEXT: dict[tuple, tuple[str, tuple]] = {}
_SHAPES_CACHED = 4096


def _known_sizes(value: Any) -> tuple[str, tuple | None]:
    """_sizes_and_shapes, a shape seen before found without a call more."""
    if type(value) is list and len(value) <= 32:
        try:
            known = _SHAPES_TEXT.get(tuple(map(tuple, value)))
        except TypeError:
            known = None
        if known is not None:
            return known
    return _sizes_and_shapes(value)


def _sizes_and_shapes(value: Any) -> tuple[str, tuple | None]:
    """The sizes as text, and as numbers when they are the plain lists torch writes."""
    if type(value) is list and len(value) <= 32:
        try:
            shapes = tuple(map(tuple, value))
            known = _SHAPES_TEXT.get(shapes)
        except TypeError:  # not a list of lists of numbers
            return _sizes(value), None
        if known is not None:
            return known
        if _plain_sizes(value):
            text = repr(value).replace(" ", "")
            if len(text) > MAX_TEXT_CHARS:
                text = text[: MAX_TEXT_CHARS - 1] + "…"
            if len(_SHAPES_TEXT) >= _SHAPES_CACHED:
                _SHAPES_TEXT.clear()
            _SHAPES_TEXT[shapes] = (text, shapes)
            return text, shapes
    return _sizes(value), None


_MAX_DTYPES = 32
_MAX_DTYPE_CHARS = 32


# Dtype lists seen -> one shared tuple: a job's entries name a few thousands of times. Only
# lists _dtypes accepted are remembered, so a hit is a list of the same names.
_DTYPES_SEEN: dict[tuple, tuple[str, ...]] = {}
_DTYPES_CACHED = 1024


def _known_dtypes(value: Any) -> tuple[str, ...]:
    if type(value) is list:
        try:
            known = _DTYPES_SEEN.get(tuple(value))
        except TypeError:  # an unhashable item: not a list of names
            known = None
        if known is not None:
            return known
        names = _dtypes(value)
        if names:
            if len(_DTYPES_SEEN) >= _DTYPES_CACHED:
                _DTYPES_SEEN.clear()
            _DTYPES_SEEN[names] = names
        return names
    return _dtypes(value)


def _dtypes(value: Any) -> tuple[str, ...]:
    """torch writes a list of names (['Float']); anything else, or too much of it, is none."""
    if type(value) is not list:
        if isinstance(value, str) and value:  # one name, as some hand-written dumps give it
            value = [value]
        else:
            return ()
    if len(value) > _MAX_DTYPES:
        return ()
    for name in value:
        if type(name) is not str or len(name) > _MAX_DTYPE_CHARS:
            return ()
    return tuple(value)
