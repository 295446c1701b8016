"""Typed JSON for the engine's own records: a dataclass (and what its fields hold) to plain
JSON and back, by its type hints.

What it is for: a node's parse, stored by the worker that made it and read back by the one
that merges a snapshot (analysis/nodemap.py). What is read back is untrusted (a table anyone
with the database can write): every value is checked against the type its field declares, and
anything else is a `CodecError`, never a half-built record. A dataclass is a JSON list of its
fields in order (the type says which class it is); a dict a list of [key, value] pairs (JSON
keys are strings only); a datetime its ISO text.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
from itertools import accumulate, chain, repeat
from typing import Any

MAX_DEPTH = 32  # of a plain JSON value held in an untyped field (`tuple`, `list`, `dict`)


class CodecError(ValueError):
    """A stored record does not have the shape its type declares."""


Encode = Callable[[Any], Any]
Decode = Callable[[Any], Any]

_encoders: dict[Any, Encode] = {}
_decoders: dict[Any, Decode] = {}


def encode(value: Any, hint: Any) -> Any:
    return _encoder(hint)(value)


def decode(data: Any, hint: Any) -> Any:
    try:
        return _decoder(hint)(data)
    except CodecError:
        raise
    except (TypeError, ValueError, IndexError, KeyError, OverflowError) as exc:
        raise CodecError(f"{_name(hint)}: {exc}") from None


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint)


# --- encoding -------------------------------------------------------------------------------


def _encoder(hint: Any) -> Encode:
    found = _encoders.get(hint)
    if found is None:
        found = _encoders[hint] = _make_encoder(hint)
    return found


def _identity(value: Any) -> Any:
    return value


def _make_encoder(hint: Any) -> Encode:
    if hint in (int, str, bool, float, type(None), Any):
        return _identity
    if hint is datetime:
        return lambda value: value.isoformat()
    if hint in (tuple, list, dict, object):
        # An untyped field holds plain JSON, kept as its text: read back through a cache, as
        # the same few values (a collective's shapes, its call site) repeat on every rank.
        return lambda value: json.dumps(_plain_encode(value), separators=(",", ":"))
    if isinstance(hint, type) and issubclass(hint, Enum):
        return lambda value: value.value
    if dataclasses.is_dataclass(hint):
        return _dataclass_encoder(hint)
    return _generic_encoder(hint)


def _generic_encoder(hint: Any) -> Encode:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_encoder(args)
    if origin is tuple and args == (int, Ellipsis):
        return _runs_encode
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return _columns_encoder(args[0])
    if origin in (list, tuple, set, frozenset):
        item = _encoder(args[0]) if args else _plain_encode
        if origin is tuple and args and args[-1] is not Ellipsis:
            parts = [_encoder(a) for a in args]
            return lambda value: [p(v) for p, v in zip(parts, value, strict=True)]
        if item is _identity:
            return sorted if origin in (set, frozenset) else list
        if origin in (set, frozenset):
            return lambda value: sorted(item(v) for v in value)
        return lambda value: [item(v) for v in value]
    if origin in (dict, Mapping):
        key, val = _encoder(args[0]), _encoder(args[1])
        return lambda value: [[key(k), val(v)] for k, v in value.items()]
    raise TypeError(f"no JSON form for {hint!r}")


def _union_encoder(args: tuple) -> Encode:
    options = [a for a in args if a is not type(None)]
    if len(options) == 1:
        inner = _encoder(options[0])
        return lambda value: None if value is None else inner(value)
    if all(a in (int, str, bool, float) for a in options):
        return _identity
    raise TypeError(f"no JSON form for a union of {options!r}")


def _dataclass_encoder(cls: type) -> Encode:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    parts = [(f.name, _encoder(hints[f.name])) for f in dataclasses.fields(cls)]

    def encode_record(value: Any) -> list:
        return [part(getattr(value, name)) for name, part in parts]

    return encode_record


def _columns_encoder(cls: type) -> Encode:
    """A list of records as its row count and one list per field (see `_columns_decoder`); a
    column whose every value is the same plain value (a node's ranks' environment, their
    stack, an entry's group) as {"same": value}, the first column never. A column of records
    (a log's facts) is itself stored as columns, and a column of lists of records (each log's
    step lines, each dump's entries) as [each row's length, their items as columns]: the
    reader then builds a node's records a field at a time, not a row at a time. A column of
    lists, maps or sets (of records or not) that are all empty, and not shared, is stored as
    [] (most of a log's parts: its launcher maps, signals, exits, watchdog lines), and a
    column of a few distinct scalars as its JSON text (`_repetitive`)."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    parts = [
        (
            f.name,
            _column_encoder(hints[f.name]),
            _shareable(hints[f.name]),
            _empty_maker(hints[f.name]) is not None,
            _column_kinds(hints[f.name]) is not None,
        )
        for f in dataclasses.fields(cls)
    ]

    def encode_rows(value: Any) -> list:
        if not value:
            return []
        out: list = [len(value)]
        for index, (name, (whole, part), shareable, emptiable, scalar) in enumerate(parts):
            values = [getattr(v, name) for v in value]
            if emptiable and not shareable and _all_empty(values):
                out.append([])
                continue
            if whole is not None:
                out.append(whole(values))
                continue
            column = list(map(part, values))
            first = column[0]
            if index and shareable and len(column) > 1 and all(c == first for c in column):
                out.append({"same": first})
            elif scalar and _repetitive(column):
                out.append(json.dumps(column, separators=(",", ":")))
            else:
                out.append(column)
        return out

    return encode_rows


_CONTAINERS = (list, dict, set, tuple, frozenset)
_TEXT_FROM = 8  # rows: a shorter column stays a list (a text would save little on it)


def _repetitive(column: list) -> bool:
    """Is a column of scalars likely stored alike on other nodes (a dump's sequence numbers
    and states, the ranks' command line), so worth one JSON text read through a cache? A few
    distinct values; never ints past 32 bits (times in ns, ids: each rank's own on a real
    job, where a bench's copied dumps repeat them)."""
    if len(column) < _TEXT_FROM or len(set(column)) * 4 > len(column):
        return False
    return not any(type(v) is int and not -(1 << 31) <= v < 1 << 31 for v in column)


def _all_empty(values: list) -> bool:
    return all(type(v) in _CONTAINERS and not v for v in values)


def _nested_kind(hint: Any) -> tuple[str, type] | None:
    """("rows", cls) for a field holding one record, ("lists", cls) for a list of records,
    ("tuples", cls) for a tuple of them."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return "rows", hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return "lists", args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return ("tuples", args[0]) if dataclasses.is_dataclass(args[0]) else None
    return None


def _column_encoder(hint: Any) -> tuple[Encode | None, Encode]:
    """(an encoder of the whole column, or None; the encoder of one value)."""
    nested = _nested_kind(hint)
    if nested is None:
        return None, _encoder(hint)
    kind, cls = nested
    rows = _encoder(list[cls])
    if kind == "rows":
        return rows, _encoder(hint)
    return lambda values: [list(map(len, values)), rows(list(chain.from_iterable(values)))], rows


def _shareable(hint: Any) -> bool:
    """May one decoded value stand for a whole column? Scalars, and plain strings' lists and
    maps (read, never changed, by the analysis); never records (each row keeps its own)."""
    if _scalar_kinds(hint) is not None or hint in (tuple, list, dict, object, datetime):
        return True  # a datetime is immutable: a log's ranks' times often one instant
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return len(options) == 1 and _shareable(options[0])
    if origin in (list, tuple) and args and args[-1] is Ellipsis:
        return args[0] in (int, str)
    if origin in (list, tuple):
        return bool(args) and all(a in (int, str, bool, float) for a in args)
    if origin in (dict, Mapping):  # and a dump's groups' members: tuples, never changed
        return all(a in (int, str) or a == tuple[int, ...] for a in args)
    return False


def _plain_encode(value: Any) -> Any:
    """An untyped field's value as JSON (tuples become lists; `_plain_decode` turns a
    `tuple` field's lists back into tuples)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain_encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain_encode(v) for k, v in value.items()}
    raise TypeError(f"no JSON form for a {type(value).__name__}")


# --- decoding -------------------------------------------------------------------------------


def _decoder(hint: Any) -> Decode:
    found = _decoders.get(hint)
    if found is None:
        found = _decoders[hint] = _make_decoder(hint)
    return found


def _exact(kind: type) -> Decode:
    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise CodecError(f"{kind.__name__} expected, got {type(value).__name__}")
        return value

    return check


def _number(value: Any) -> Any:
    # An int stays an int: a field typed float may hold one, and the verdict's JSON shows it.
    if type(value) not in (int, float):
        raise CodecError(f"number expected, got {type(value).__name__}")
    return value


def _none(value: Any) -> None:
    if value is not None:
        raise CodecError("null expected")
    return None


def _when(value: Any) -> datetime:
    if type(value) is not str or len(value) > 40:
        raise CodecError("a time as ISO text expected")
    return datetime.fromisoformat(value)


def _make_decoder(hint: Any) -> Decode:
    if hint in (int, str, bool):
        return _exact(hint)
    if hint is float:
        return _number
    if hint is type(None):
        return _none
    if hint is datetime:
        return _when
    if hint is tuple:
        return _cached_tuple
    if hint in (list, dict, object):
        # Shared by every record that stored the same text: such fields are read, never changed.
        return _cached_plain
    if hint is Any:
        return _plain_decode
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    if dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    return _generic_decoder(hint)


def _generic_decoder(hint: Any) -> Decode:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(args)
    if origin is tuple and args == (int, Ellipsis):
        return _runs_decode
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return _columns_decoder(args[0])
    if origin in (list, tuple, set, frozenset):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return _fixed_tuple_decoder(args)
        kinds = _column_kinds(args[0]) if args else None
        if kinds is not None:  # scalars: their types checked as a whole, in C
            return _scalars_decoder(origin, kinds)
        return _items_decoder(origin, _decoder(args[0]) if args else _plain_decode)
    if origin in (dict, Mapping):
        return _pairs_decoder(_decoder(args[0]), _decoder(args[1]))
    raise TypeError(f"no JSON form for {hint!r}")


def _items_decoder(build: type, item: Decode) -> Decode:
    def decode_items(value: Any) -> Any:
        if type(value) is not list:
            raise CodecError(f"list expected, got {type(value).__name__}")
        return build([item(v) for v in value])

    return decode_items


def _scalars_decoder(build: type, kinds: frozenset) -> Decode:
    """A list of scalars (a dump's times, a node's pids): the same checks as each item's own
    decoder (exact types: no bool for an int), made on the whole list at once."""
    names = sorted(k.__name__ for k in kinds)

    def decode_scalars(value: Any) -> Any:
        if type(value) is not list:
            raise CodecError(f"list expected, got {type(value).__name__}")
        if not kinds.issuperset(map(type, value)):
            raise CodecError(f"a list of {names} expected")
        return build(value)

    return decode_scalars


def _pairs_decoder(key: Decode, val: Decode) -> Decode:
    def decode_pairs(value: Any) -> dict:
        if type(value) is not list:
            raise CodecError(f"list of pairs expected, got {type(value).__name__}")
        out = {}
        for pair in value:
            if type(pair) is not list or len(pair) != 2:
                raise CodecError("a [key, value] pair expected")
            out[key(pair[0])] = val(pair[1])
        return out

    return decode_pairs


def _union_decoder(args: tuple) -> Decode:
    options = [a for a in args if a is not type(None)]
    nullable = len(options) < len(args)
    if len(options) == 1:
        inner = _decoder(options[0])
        if not nullable:
            return inner
        return lambda value: None if value is None else inner(value)
    kinds = {int if a is float else a for a in options} | ({float} if float in options else set())
    kinds |= {type(None)} if nullable else set()

    def decode_scalar(value: Any) -> Any:
        if type(value) not in kinds:
            raise CodecError(f"one of {sorted(k.__name__ for k in kinds)} expected")
        return value

    return decode_scalar


def _fixed_tuple_decoder(args: tuple) -> Decode:
    parts = [_decoder(a) for a in args]

    def decode_tuple(value: Any) -> tuple:
        if type(value) is not list or len(value) != len(parts):
            raise CodecError(f"a list of {len(parts)} expected")
        return tuple(p(v) for p, v in zip(parts, value, strict=True))

    return decode_tuple


_SCALARS = {int: ("int",), str: ("str",), bool: ("bool",), float: ("int", "float")}


def _scalar_kinds(hint: Any) -> tuple[tuple[str, ...], bool] | None:
    """(type names, nullable) when the hint is a scalar or an optional scalar, else None."""
    if hint in _SCALARS:
        return _SCALARS[hint], False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        options = [a for a in args if a is not type(None)]
        if all(a in _SCALARS for a in options):
            names = tuple(dict.fromkeys(n for a in options for n in _SCALARS[a]))
            return names, len(options) < len(args)
    return None


def _dataclass_decoder(cls: type) -> Decode:
    """A decoder written for the class (its checks inline, one call to build it): a stored
    snapshot holds hundreds of thousands of these records."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    fields = dataclasses.fields(cls)
    count = len(fields)
    env: dict[str, Any] = {"CodecError": CodecError, "cls": cls, "new": object.__new__}
    env["set_attr"] = object.__setattr__
    lines = [
        "def decode_record(v):",
        f"    if type(v) is not list or len(v) != {count}:",
        f"        raise CodecError('{cls.__name__}: a list of its {count} fields expected')",
    ]
    names = []
    for index, f in enumerate(fields):
        name = f"x{index}"
        names.append(name)
        lines.append(f"    {name} = v[{index}]")
        scalar = _scalar_kinds(hints[f.name])
        if scalar is not None:
            kinds, nullable = scalar
            test = " and ".join(f"type({name}) is not {k}" for k in kinds)
            if nullable:
                test = f"{name} is not None and {test}"
            lines += [f"    if {test}:", f"        raise CodecError('{cls.__name__}.{f.name}')"]
        else:
            env[f"d{index}"] = _decoder(hints[f.name])
            lines.append(f"    {name} = d{index}({name})")
    plain = all(f.init for f in fields) and not hasattr(cls, "__post_init__")
    if plain:
        lines.append(f"    return cls({', '.join(names)})")
    else:  # built field by field: no __post_init__ runs on stored data
        lines.append("    r = new(cls)")
        lines += [f"    set_attr(r, {f.name!r}, x{i})" for i, f in enumerate(fields)]
        lines.append("    return r")
    exec("\n".join(lines), env)  # noqa: S102 - the source is made here from field names only
    return env["decode_record"]


MAX_ROWS = 1 << 20  # of one stored list of records


def _columns_decoder(cls: type) -> Decode:
    """A list of records stored as columns (`_columns_encoder`): each column checked as a
    whole (its values' types against the field's), the records built in one call per row."""
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    fields = dataclasses.fields(cls)
    # Per field: its name, its scalar kinds (or None), its decoder, whether it may be shared,
    # a decoder of its whole column (records), an empty value's maker (lists, maps, sets).
    columns = [
        (
            f.name,
            _column_kinds(hints[f.name]),
            _decoder(hints[f.name]),
            _shareable(hints[f.name]),
            _nested_decoder(hints[f.name]),
            _empty_maker(hints[f.name]),
            _list_item_kinds(hints[f.name]),
        )
        for f in fields
    ]
    plain = all(f.init for f in fields) and not hasattr(cls, "__post_init__")
    where = cls.__name__
    # A class read, never changed, once read back (a log's facts) may have its empty lists and
    # sets as one empty tuple and frozenset a column: nothing to build, nothing to free.
    shared_empties = getattr(cls, "CODEC_SHARED_EMPTIES", False) is True
    env: dict[str, Any] = {"CodecError": CodecError, "MAX_ROWS": MAX_ROWS, "cls": cls}
    env["width"] = len(fields) + 1
    env |= {"built": _built, "fields": fields, "repeat": repeat, "text_column": _text_column}
    env |= {"chain": chain.from_iterable, "lists": frozenset({list})}
    lines = [
        "def decode_rows(v):",
        "    if type(v) is not list:",
        f"        raise CodecError('{where}: a list of rows expected')",
        "    if not v:",
        "        return []",
        "    count = v[0]",
        "    if type(count) is not int or not 0 < count <= MAX_ROWS or len(v) != width:",
        f"        raise CodecError('{where}: a row count and {len(fields)} columns expected')",
    ]
    for index, spec in enumerate(columns, 1):
        lines += _column_lines(index, spec, where, env, shared_empties)
    names = ", ".join(f"c{i}" for i in range(1, len(fields) + 1))
    if plain:
        lines.append(f"    return list(map(cls, {names}))")
    else:
        lines.append(f"    return [built(cls, fields, row) for row in zip({names}, strict=True)]")
    exec("\n".join(lines), env)  # noqa: S102 - the source is made here from field names only
    return env["decode_rows"]


def _column_lines(
    index: int, spec: tuple, where: str, env: dict[str, Any], shared_empties: bool = False
) -> list[str]:
    """The decoder's lines for one stored column (`c{index}`: a list, or one value repeated),
    checked: the column's length, its values' types, or each value's decoder."""
    name, kinds, decode_one, shareable, whole, empty, item_kinds = spec
    c, label = f"c{index}", f"{where}.{name}"
    env[f"d{index}"] = decode_one
    lines = [f"    {c} = v[{index}]"]
    if empty is not None and not shareable:  # [] for a column of empty values (no call)
        env[f"e{index}"] = empty
        made = _fresh_empties(empty, index, shared_empties)
        lines += [f"    if {c} == []:", f"        {c} = {made}"]
        lines += ["    else:"] if whole is not None else []
    if whole is not None:
        env[f"w{index}"] = whole
        pad = "    " if empty is not None and not shareable else ""
        return [*lines, f"    {pad}{c} = w{index}({c}, count, '{label}')"]
    if empty is not None and not shareable:
        lines += [f"    elif type({c}) is list:"]
    else:
        lines += [f"    if type({c}) is list:"]
    lines += [
        f"        if len({c}) != count:",
        f"            raise CodecError('{label}: a column of ' + str(count) + ' expected')",
    ]
    if kinds is not None:
        env[f"k{index}"] = kinds
        lines += [f"        if not k{index}.issuperset(map(type, {c})):"]
        lines += [f"            raise CodecError('{label}')"]
    elif item_kinds is not None:  # lists of scalars (a dump's times): all checked at once
        env[f"i{index}"] = item_kinds
        lines += [
            f"        if not lists.issuperset(map(type, {c}))"
            f" or not i{index}.issuperset(map(type, chain({c}))):",
            f"            raise CodecError('{label}: lists of ' + str(sorted(map(str, i{index}))))",
        ]
    else:
        lines.append(f"        {c} = list(map(d{index}, {c}))")
    if kinds is not None:  # a repetitive column as its JSON text (`_repetitive`)
        lines += [f"    elif type({c}) is str:", f"        {c} = text_column({c}, count, k{index})"]
    if index > 1 and shareable and kinds is not None:  # one value checked inline
        lines += [
            f"    elif type({c}) is dict and len({c}) == 1"
            f" and type({c}.get('same', {c})) in k{index}:",
            f"        {c} = repeat({c}['same'], count)",
        ]
    elif index > 1 and shareable:
        lines += [
            f"    elif type({c}) is dict and len({c}) == 1 and 'same' in {c}:",
            f"        {c} = repeat(d{index}({c}['same']), count)",
        ]
    lines += [
        "    else:",
        f"        raise CodecError('{label}: a column of ' + str(count) + ' expected')",
    ]
    return lines


def _nested_decoder(hint: Any) -> Callable[[Any, int, str], list] | None:
    """The decoder of a whole column of records, or of lists of records (`_column_encoder`)."""
    nested = _nested_kind(hint)
    if nested is None:
        return None
    kind, cls = nested
    rows = _decoder(list[cls])
    if kind == "rows":

        def decode_column(column: Any, count: int, where: str) -> list:
            found = rows(column)
            if len(found) != count:
                raise CodecError(f"{where}: {count} records expected")
            return found

        return decode_column

    def decode_lists(column: Any, count: int, where: str) -> list:
        if type(column) is not list or len(column) != 2 or type(column[0]) is not list:
            raise CodecError(f"{where}: [lengths, records] expected")
        lengths = column[0]
        if len(lengths) != count or not {int}.issuperset(map(type, lengths)):
            raise CodecError(f"{where}: {count} lengths expected")
        if column[1] == [] and lengths.count(0) == count:  # most of a log's parts: no call
            return [() for _ in lengths] if kind == "tuples" else [[] for _ in lengths]
        items = rows(column[1])
        if kind == "lists" and len(items) == count and lengths.count(1) == count:
            return [[item] for item in items]  # one record a row (a log's step summary)
        if min(lengths) < 0 or sum(lengths) != len(items):
            raise CodecError(f"{where}: the lengths do not add up to the records")
        ends = list(accumulate(lengths))
        found = map(items.__getitem__, map(slice, [0, *ends[:-1]], ends))
        return list(map(tuple, found) if kind == "tuples" else found)

    return decode_lists


def _fresh_empties(empty: Callable[[], Any], index: int, shared: bool = False) -> str:
    """The expression of a column of `count` empty values: each row its own list, map or set
    (made in C, by `map`); an empty tuple or frozenset is one value for all, and so are a
    `shared` class's empty lists (an empty tuple) and sets (an empty frozenset)."""
    if shared and empty in (list, set):
        return "repeat((), count)" if empty is list else "repeat(frozenset(), count)"
    if empty in (list, dict, set):
        return f"list(map(e{index}, repeat((), count)))"
    return f"repeat(e{index}(), count)"


def _empty_maker(hint: Any) -> Callable[[], Any] | None:
    """What makes a fresh empty value of the field (a list, map or set; an empty tuple is
    one value), when its decoder reads [] as one; else None."""
    try:
        empty = _decoder(hint)([])
    except (CodecError, TypeError, ValueError):
        return None
    if type(empty) in (list, dict, set):
        return type(empty)
    if empty == () or empty == frozenset():
        return lambda: empty
    return None


def _list_item_kinds(hint: Any) -> frozenset | None:
    """The types of a list-of-scalars field's items (`list[int | None]`), else None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list and len(args) == 1:
        return _column_kinds(args[0])
    return None


def _column_kinds(hint: Any) -> frozenset | None:
    """The types a scalar field's values may have, or None for any other field."""
    scalar = _scalar_kinds(hint)
    if scalar is None:
        return None
    names, nullable = scalar
    kinds = frozenset({"int": int, "str": str, "bool": bool, "float": float}[n] for n in names)
    return kinds | {type(None)} if nullable else kinds


def _built(cls: type, fields: tuple, row: tuple) -> Any:
    """A record field by field: no __post_init__ runs on stored data."""
    record = object.__new__(cls)
    for f, value in zip(fields, row, strict=True):
        object.__setattr__(record, f.name, value)
    return record


# A column of scalars stored as its JSON text, by text: its values and the types among them.
_COLUMNS: dict[str, tuple[tuple, frozenset]] = {}
_COLUMNS_CHARS = 1 << 22  # characters the cache's keys may hold in all
_columns_chars = 0
_PLAIN_SCALARS = frozenset({int, str, bool, float, type(None)})


def _text_column(text: str, count: int, kinds: frozenset) -> tuple:
    """A repetitive column's values from its JSON text (`_repetitive`), read once per text:
    the same text is most nodes' (their dumps' sequence numbers, their ranks' states)."""
    global _columns_chars
    found = _COLUMNS.get(text)
    if found is None:
        if len(text) > MAX_PLAIN_TEXT or text[:1] != "[":
            raise CodecError("a column's JSON text expected")
        values = json.loads(text)
        if type(values) is not list or not _PLAIN_SCALARS.issuperset(map(type, values)):
            raise CodecError("a column of plain values expected")
        found = (tuple(values), frozenset(map(type, values)))
        if _columns_chars + len(text) > _COLUMNS_CHARS:
            _COLUMNS.clear()
            _columns_chars = 0
        _COLUMNS[text] = found
        _columns_chars += len(text)
    values, types = found
    if len(values) != count or not kinds.issuperset(types):
        raise CodecError(f"a column of {count} of {sorted(k.__name__ for k in kinds)} expected")
    return values


_TUPLES: dict[str, Any] = {}
_TUPLES_CACHED = 65_536
MAX_PLAIN_TEXT = 64 * 1024  # characters of one untyped field's JSON


def _plain_text(value: Any, tuples: bool = False) -> Any:
    if type(value) is not str or len(value) > MAX_PLAIN_TEXT:
        raise CodecError("an untyped field's JSON text expected")
    return _plain_decode(json.loads(value), tuples)


def _cached_tuple(value: Any) -> Any:
    found = _TUPLES.get(value) if type(value) is str else None
    if found is None:
        found = _plain_text(value, tuples=True)
        if len(_TUPLES) >= _TUPLES_CACHED:
            _TUPLES.clear()
        _TUPLES[value] = found
    return found


_PLAIN: dict[str, Any] = {}


def _cached_plain(value: Any) -> Any:
    found = _PLAIN.get(value, _PLAIN) if type(value) is str else _PLAIN
    if found is _PLAIN:
        found = _plain_text(value)
        if len(_PLAIN) >= _TUPLES_CACHED:
            _PLAIN.clear()
        _PLAIN[value] = found
    return found


# A tuple of ints (a group's members: the whole world, on every rank's dump) as runs,
# "0-4095,4097": linear in the runs, not the ranks, and read once per distinct text.
_RUNS: dict[str, tuple[int, ...]] = {}
MAX_RUN_INTS = 1 << 20  # ints one text may stand for


# Encoded texts of long tuples, by value: every rank of a node lists the same default group
# (the whole world: 3 ms a rank at 32,000 ranks in the loop below, a hash and a compare here).
_RUNS_TEXT: dict[tuple[int, ...], str] = {}
_RUNS_TEXT_INTS = 1 << 20  # ints the cache's keys may hold in all
_RUNS_TEXT_FROM = 256  # shorter tuples are encoded each time (cheaper than hashing them)
_runs_text_ints = 0
# ... and first by the tuple itself: the parser hands every dump the same tuple for the same
# list (flight_recorder._rank_list), and a tuple's hash is not kept (0.1 ms at 32,000 ints,
# on each of a node's dumps). The tuple is held, so its id stays its own.
_RUNS_OF: dict[int, tuple[tuple[int, ...], str]] = {}
_RUNS_OF_CACHED = 256
_runs_of_ints = 0  # ints the tuples held there hold, in _RUNS_TEXT_INTS too


def _runs_encode(value: tuple[int, ...]) -> str | list[int]:
    global _runs_text_ints, _runs_of_ints
    if len(value) < _RUNS_TEXT_FROM:
        return _runs_text(value)
    same = _RUNS_OF.get(id(value))
    if same is not None and same[0] is value:
        return same[1]
    found = _RUNS_TEXT.get(value)
    if found is None:
        found = _runs_text(value)
        if type(found) is not str:
            return found
        if _runs_text_ints + len(value) > _RUNS_TEXT_INTS:
            _RUNS_TEXT.clear()
            _runs_text_ints = 0
        _RUNS_TEXT[value] = found
        _runs_text_ints += len(value)
    if len(_RUNS_OF) >= _RUNS_OF_CACHED or _runs_of_ints + len(value) > _RUNS_TEXT_INTS:
        _RUNS_OF.clear()
        _runs_of_ints = 0
    _RUNS_OF[id(value)] = (value, found)
    _runs_of_ints += len(value)
    return found


def _runs_text(value: tuple[int, ...]) -> str | list[int]:
    if any(item < 0 for item in value):
        return list(value)  # runs are of non-negative ints
    parts: list[str] = []
    start = previous = None
    for item in value:
        if start is not None and item == previous + 1:
            previous = item
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = item
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def _runs_decode(value: Any) -> tuple[int, ...]:
    found = _RUNS.get(value) if type(value) is str else None
    if found is not None:
        return found
    if type(value) is list and len(value) <= MAX_RUN_INTS and all(type(v) is int for v in value):
        return tuple(value)
    if type(value) is not str or len(value) > MAX_PLAIN_TEXT * 16:
        raise CodecError("a tuple of ints as runs expected")
    out: list[int] = []
    for part in value.split(",") if value else ():
        first, dash, last = part.partition("-")
        if not (first.isdecimal() and (not dash or last.isdecimal())):
            raise CodecError("a run of ints expected")
        low, high = int(first), int(last or first)
        if high < low or len(out) + high - low >= MAX_RUN_INTS:
            raise CodecError("a run of ints out of bounds")
        out.extend(range(low, high + 1))
    found = tuple(out)
    if len(_RUNS) >= _TUPLES_CACHED:
        _RUNS.clear()
    _RUNS[value] = found
    return found


def _plain_decode(value: Any, tuples: bool = False, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise CodecError("nested too deep")
    kind = type(value)
    if kind in (str, int, float, bool) or value is None:
        return value
    if kind is list:
        items = [_plain_decode(v, tuples, depth + 1) for v in value]
        return tuple(items) if tuples else items
    if kind is dict:
        return {k: _plain_decode(v, tuples, depth + 1) for k, v in value.items()}
    raise CodecError(f"no JSON value: {kind.__name__}")
