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
import sys
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from enum import Enum
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
        return _plain_encode
    if isinstance(hint, type) and issubclass(hint, Enum):
        return lambda value: value.value
    if dataclasses.is_dataclass(hint):
        return _dataclass_encoder(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union_encoder(args)
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
        return lambda value: _plain_decode(value, tuples=True)
    if hint in (list, dict, object, Any):
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
    if origin in (list, tuple, set, frozenset):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return _fixed_tuple_decoder(args)
        item = _decoder(args[0]) if args else _plain_decode
        build = origin

        def decode_items(value: Any) -> Any:
            if type(value) is not list:
                raise CodecError(f"list expected, got {type(value).__name__}")
            return build([item(v) for v in value])

        return decode_items
    if origin in (dict, Mapping):
        key, val = _decoder(args[0]), _decoder(args[1])

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
    raise TypeError(f"no JSON form for {hint!r}")


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


def _dataclass_decoder(cls: type) -> Decode:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    fields = dataclasses.fields(cls)
    parts = [(f.name, _decoder(hints[f.name])) for f in fields]
    count = len(parts)
    new, set_attr = object.__new__, object.__setattr__

    def decode_record(value: Any) -> Any:
        if type(value) is not list or len(value) != count:
            raise CodecError(f"{cls.__name__}: a list of its {count} fields expected")
        # Built field by field (frozen records too): no __post_init__ runs on stored data.
        record = new(cls)
        for (name, part), item in zip(parts, value, strict=True):
            set_attr(record, name, part(item))
        return record

    return decode_record


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
