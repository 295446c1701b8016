"""PyTorch flight-recorder dumps, read without ever executing anything from them.

torch writes a pickle by default (`_dump_fr_trace`) or JSON (`_dump_fr_trace_json`). A pickle
from a node is untrusted input: `pickle.load` on it can run arbitrary code. `SafeUnpickler`
builds only what the pickle opcodes build natively (dict, list, tuple, str, bytes, int, float,
bool, None) and refuses any global lookup (classes, functions, reduce calls) with a clear error.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass, field
from typing import Any

# The collector cuts an artifact at 2 MiB; a bundle may carry a bigger dump, not an unbounded one.
MAX_DUMP_BYTES = 16 * 1024 * 1024
# What unpickling may build, estimated before anything is built (`_scan`): a dump of plain data
# weighs a few times its size; a hostile one (1-byte opcodes that each build a list) 80 times.
MAX_UNPICKLED_BYTES = 256 * 1024 * 1024
# Memo slots the C unpickler allocates up to the highest PUT index it is given (7 bytes asking
# for slot 10**8 cost 1.5 GB): indexes are sequential in every pickler, so bound them.
MAX_MEMO_INDEX = 1 << 21
# Anything copied out of a dump into the diagnosis is cut at this many characters; containers
# are rendered with the same budget, so shared references (a list of itself twice, 30 deep:
# 2**30 leaves from 400 bytes) never expand.
MAX_TEXT_CHARS = 512
MAX_RENDER_DEPTH = 32


class UnsafePickleError(pickle.UnpicklingError):
    """The dump asked to import something, or to build more than any dump holds."""


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise UnsafePickleError(
            f"refusing to load {module}.{name}: flight-recorder dumps contain only plain "
            "containers and scalars"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a persistent reference in a flight-recorder dump")


def safe_loads(data: bytes) -> Any:
    if len(data) > MAX_DUMP_BYTES:
        raise UnsafePickleError(f"dump of {len(data)} bytes is above the {MAX_DUMP_BYTES} cap")
    _scan(data)
    # A BufferedReader has `peek`, so the C unpickler reads the dump in 8 KiB chunks; on a bare
    # BytesIO it calls `read` once per opcode, which costs more than the unpickling itself.
    return SafeUnpickler(io.BufferedReader(io.BytesIO(data))).load()


# Opcodes walked by one regex: no argument, or a fixed-size one. Each alternative starts with
# its own bytes, so the match is linear; possessive, so nothing is kept to backtrack into.
# Sets (EMPTY_SET, ADDITEMS, FROZENSET: 216 bytes each from one opcode) are left out: torch
# never writes them, and they are refused. `.` (STOP), `r` (LONG_BINPUT) and everything with a
# length or a line are handled by `_scan` itself.
_FIXED_RUN = re.compile(
    rb"(?:[()012NRabdelostuQ\]}\x81\x85-\x89\x92-\x94\x97\x98]"
    rb"|[Khq\x80\x82].|[M\x83]..|[Jj\x84]....|G........)*+",
    re.DOTALL,
)
# Opcode -> what `_scan` does with it: N > 0, skip a payload whose little-endian length takes
# N bytes; _LINE/_LINES2, skip one/two lines; _PUT, check a memo index; _STOP; _REFUSE.
_STOP, _PUT, _LINE, _LINES2, _FRAME, _REFUSE = -1, -2, -3, -4, -5, 0
_ACTIONS = [_REFUSE] * 256
for _op, _action in {
    **dict.fromkeys(b"\x8cUC\x8a", 1),
    **dict.fromkeys(b"XBT\x8b", 4),
    **dict.fromkeys(b"\x8d\x8e\x96", 8),
    **dict.fromkeys(b"ILFSVPg", _LINE),
    **dict.fromkeys(b"ci", _LINES2),
    **dict.fromkeys(b"rp", _PUT),
    ord("."): _STOP,
    0x95: _FRAME,
}.items():
    _ACTIONS[_op] = _action
# Opcode bytes that build a container from one or two bytes of dump. Counted over the whole
# dump (an overcount: payload and argument bytes that look like them count too).
_NOT_BUILDS = bytes(b for b in range(256) if b not in b"]}()\x85\x86\x87")


def _scan(data: bytes) -> None:
    """Walk the opcodes without building anything; refuse a dump that would build more than
    MAX_UNPICKLED_BYTES or ask for a memo slot past MAX_MEMO_INDEX. Fixed-size opcodes go a run
    at a time through `_FIXED_RUN`, payloads are skipped by their length. A dump that ends
    early is left to the unpickler, which fails on it before building past it."""
    run = _FIXED_RUN.match
    payload_bytes = payloads = at = 0
    end = len(data)
    while True:
        at = run(data, at).end()
        if at >= end:
            break
        op = data[at]
        action = _ACTIONS[op]
        if action > 0:
            size = int.from_bytes(data[at + 1 : at + 1 + action], "little")
            _check_length(size, end - at - 1 - action, at)
            at += 1 + action + size
            payloads += 1
            payload_bytes += size
        elif action == _STOP:
            break
        elif action == _FRAME:  # a frame's opcodes follow: only its length is checked
            _check_length(int.from_bytes(data[at + 1 : at + 9], "little"), end - at - 9, at)
            at += 9
        elif action in (_PUT, _LINE, _LINES2):
            at = _skip_argument(data, at, op, action)
        else:
            raise UnsafePickleError(f"opcode {op:#04x} at byte {at}: not in a flight recorder")
    builds = len(data.translate(None, _NOT_BUILDS))
    weight = 16 * (end - payload_bytes) + 80 * builds + 80 * payloads + 4 * payload_bytes
    if weight > MAX_UNPICKLED_BYTES:
        raise UnsafePickleError(
            f"refusing a dump that would build about {weight >> 20} MiB of objects from "
            f"{end} bytes (cap {MAX_UNPICKLED_BYTES >> 20} MiB)"
        )


def _skip_argument(data: bytes, at: int, op: int, action: int) -> int:
    """Past the argument of a line-terminated opcode or LONG_BINPUT; PUT indexes checked."""
    if op == 0x72:  # LONG_BINPUT
        _check_memo_index(int.from_bytes(data[at + 1 : at + 5], "little"))
        return at + 5
    start = at = at + 1
    for _ in range(2 if action == _LINES2 else 1):
        newline = data.find(b"\n", at)
        if newline < 0:
            return len(data)
        at = newline + 1
    if op == 0x70:  # PUT: the index in decimal
        text = data[start : at - 1]
        if len(text) > 10 or not text.isdigit():
            raise UnsafePickleError(f"PUT index {text[:12]!r} is not a memo index")
        _check_memo_index(int(text))
    return at


def _check_length(size: int, left: int, at: int) -> None:
    """The unpickler allocates what a length announces before it reads (BYTEARRAY8 of 2**63:
    a MemoryError, and CPython's own "deallocated bytearray" error; of 1 GiB: 1 GiB)."""
    if size > left:
        raise UnsafePickleError(
            f"opcode at byte {at} announces {size} bytes; {max(left, 0)} are left in the dump"
        )


def _check_memo_index(index: int) -> None:
    if index > MAX_MEMO_INDEX:
        raise UnsafePickleError(
            f"refusing memo index {index}: dumps number their objects from 0 (cap {MAX_MEMO_INDEX})"
        )


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
