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

MAX_DUMP_BYTES = 64 * 1024 * 1024


class UnsafePickleError(pickle.UnpicklingError):
    """The dump asked to import something; plain flight-recorder dumps never do."""


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
    # A BufferedReader has `peek`, so the C unpickler reads the dump in 8 KiB chunks; on a bare
    # BytesIO it calls `read` once per opcode, which costs more than the unpickling itself.
    return SafeUnpickler(io.BufferedReader(io.BytesIO(data))).load()


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


_RANK_SUFFIX = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")


def rank_from_dump_path(path: str) -> int | None:
    match = _RANK_SUFFIX.search(path.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


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
    except (AttributeError, TypeError, RecursionError) as exc:  # a hostile shape, not torch's
        dump.entries, dump.pg_ranks, dump.last_completed = [], {}, {}
        dump.problems.append(f"{path}: dump not understood ({type(exc).__name__}: {exc})")
    return dump


def _read_dump(dump: FrDump, raw: dict) -> None:
    dump.version = str(raw.get("version", ""))
    if isinstance(raw.get("rank"), int):
        dump.rank = raw["rank"]
    for pg_name, config in (raw.get("pg_config") or {}).items():
        ranks = config.get("ranks") if isinstance(config, dict) else None
        parsed = _rank_list(ranks)
        if parsed is not None:
            dump.pg_ranks[str(pg_name)] = parsed
    for pg_id, status in (raw.get("pg_status") or {}).items():
        if isinstance(status, dict) and isinstance(status.get("last_completed_collective"), int):
            dump.last_completed[str(pg_id)] = status["last_completed_collective"]
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
        return [v for v in value if isinstance(v, int)]
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
    return [v for v in parsed if isinstance(v, int)] if isinstance(parsed, list) else None


def _call_site(frames: list) -> str:
    """The first recorded frame outside torch: the user's line that issued the collective."""
    usable = [f for f in frames if isinstance(f, dict)]
    chosen = next((f for f in usable if "/torch/" not in str(f.get("filename", ""))), None)
    chosen = chosen or (usable[0] if usable else None)
    if chosen is None:
        return ""
    filename = str(chosen.get("filename", "?")).rsplit("/", 1)[-1]
    return f"{chosen.get('name', '?')} ({filename}:{chosen.get('line', '?')})"


def _sizes(value: Any) -> str:
    # Pickle and JSON dumps both give nested lists of ints; one compact spelling for both.
    return repr(value).replace(" ", "")


def _entry(item: Any) -> FrEntry | None:
    if not isinstance(item, dict):
        return None
    get = item.get
    seq = get("collective_seq_id")
    if not isinstance(seq, int):
        return None
    is_p2p = bool(get("is_p2p"))
    if is_p2p:
        seq = get("p2p_seq_id", seq)
    # Pickle gives process_group as a tuple (id, name), JSON a list; keep the id, which
    # pg_status uses too.
    group = get("process_group")
    if isinstance(group, (tuple, list)) and group:
        pg = str(group[0])
    else:
        pg = str(group if group is not None else get("pg_id"))
    state = str(get("state", ""))
    created = get("time_created_ns")
    frames = get("frames")
    return FrEntry(
        pg,
        seq,
        str(get("profiling_name", "?")),
        _sizes(get("input_sizes")),
        _sizes(get("output_sizes")),
        state,
        # NCCL marks state=completed; gloo entries stay "scheduled" and are retired once done.
        state == "completed" or bool(get("retired")),
        is_p2p,
        created if isinstance(created, int) else None,
        frames if isinstance(frames, list) else [],
    )
