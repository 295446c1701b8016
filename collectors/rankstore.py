"""The per-rank table stored apart from the diagnosis head, in chunks (`RankChunk` rows).

At 32,000 ranks the table is ~13 MB of the diagnosis's JSON; stored inside the jsonb column,
the verdict's UPDATE parsed, compressed and wrote all of it, and every page of it decompressed
the whole column. Stored as chunks of CHUNK_ROWS rows in table order (JSON, zlib level 1), a
page reads the one or two chunks it falls in, a rank the chunk whose rank range holds it, and
the write is a few small bytea rows. Pure functions here; the model and its readers in
collectors/models.py.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

import orjson

CHUNK_ROWS = 1000
# The row fields whose distinct values a reader gathers over the whole table (the post-mortem's
# latest step stamp): made at write time, so no reader decodes every chunk for them.
VALUE_FIELDS = ("last_step_at",)


@dataclass(frozen=True)
class Chunk:
    first: int  # the position of its first row in the table
    count: int
    rank_lo: int | None  # its rows' smallest and largest rank (None: no row has one)
    rank_hi: int | None
    rows: bytes  # zlib of the rows' JSON array


def split(diagnosis: dict | None) -> tuple[dict | None, list | None]:
    """The diagnosis head (without `per_rank`) and the table, or (diagnosis, None) if it has
    none (None, or stored in its head already)."""
    if not isinstance(diagnosis, dict) or "per_rank" not in diagnosis:
        return diagnosis, None
    head = {k: v for k, v in diagnosis.items() if k != "per_rank"}
    rows = diagnosis["per_rank"]
    return head, rows if isinstance(rows, list) else []


def chunks(rows: list) -> list[Chunk]:
    made = []
    for first in range(0, len(rows), CHUNK_ROWS):
        part = rows[first : first + CHUNK_ROWS]
        ranks = [r["rank"] for r in part if isinstance(r, dict) and isinstance(r.get("rank"), int)]
        text = rows_json(part)
        made.append(
            Chunk(
                first=first,
                count=len(part),
                rank_lo=min(ranks) if ranks else None,
                rank_hi=max(ranks) if ranks else None,
                rows=zlib.compress(text, 1),
            )
        )
    return made


def rows_json(rows: list) -> bytes:
    """`json.dumps(rows, separators=(",", ":"))`, encoded: the same bytes, made by orjson (8x
    faster: 0.13 s of the verdict's store at 32,000 ranks) when the rows hold only what it
    writes as json does, else by json."""
    if _plain(rows):
        try:
            text = orjson.dumps(rows)
        except TypeError:  # an int past 64 bits, a lone surrogate, a key that is not a string
            text = None
        # json escapes every byte past "~" (ensure_ascii); orjson writes DEL and UTF-8 as is.
        if text is not None and text.isascii() and b"\x7f" not in text:
            return text
    return json.dumps(rows, separators=(",", ":")).encode()


_SCALARS = frozenset((str, int, bool, type(None)))


def _plain(rows: list) -> bool:
    """Only exact strings, ints, booleans, None, lists, dicts and floats that json writes
    without an exponent (orjson writes 1e-05 as 0.00001, NaN as null) or zero. The rows'
    own values looked at inline: a call for each of them cost as much as json's encoding."""
    for row in rows:
        if type(row) is not dict:
            if not _plain_value(row):
                return False
            continue
        for value in row.values():
            kind = type(value)
            if kind in _SCALARS:
                continue
            if kind is float:
                if value == 0.0 or 1e-4 <= abs(value) < 1e16:
                    continue
                return False
            if not _plain_value(value):
                return False
    return True


def _plain_value(value) -> bool:
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is float:
        return value == 0.0 or 1e-4 <= abs(value) < 1e16
    try:
        if kind is dict:
            return all(map(_plain_value, value.values()))
        if kind is list:
            return all(map(_plain_value, value))
    except RecursionError:  # json refuses it too
        return False
    return False


def rows_of(stored: bytes | memoryview) -> list:
    rows = json.loads(zlib.decompress(bytes(stored)))
    return rows if isinstance(rows, list) else []


def field_values(rows: list, names=VALUE_FIELDS) -> dict[str, list]:
    """The distinct non-null values each named field takes over the rows (first seen order)."""
    found: dict[str, dict] = {name: {} for name in names}
    for row in rows:
        if not isinstance(row, dict):
            continue
        for name in names:
            value = row.get(name)
            if value is None:
                continue
            # A scalar is its own key (with its type: 1 and True are one dict key otherwise).
            plain = isinstance(value, (str, int, float, bool))
            key = (type(value), value) if plain else json.dumps(value, sort_keys=True)
            found[name].setdefault(key, value)
    return {name: list(values.values()) for name, values in found.items()}
