"""Slurm's compressed host lists, expanded here (the console never asks the controller to).

The forms Slurm documents (hostlist(3), slurm.conf's NodeName, `scontrol show hostnames`):
- names separated by commas or white space: `node1,node2 node3`;
- a common prefix and a bracket of numbers and ranges: `tux[0-5,12,20-25]`;
- zero padding kept from the range's first bound: `gpu[001-004,010]` -> gpu001 ... gpu010;
- text after a bracket and several brackets in one name (every combination, in order):
  `rack[0-1]-node[01-02]`, `a[1-2]b`;
- a 3-D box of base-36 coordinates, from the BlueGene days: `bgl[123x456]` (every
  coordinate from 1 to 4, 2 to 5 and 3 to 6: 64 names).

Bounded by construction: the count is known before anything is expanded, and a list past
`limit` names (or a range past 10**9) is refused with the reason, not expanded.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Iterator

MAX_HOSTS = 100_000
_DIGITS36 = string.digits + string.ascii_uppercase


class HostListError(ValueError):
    """Not a host list Slurm would write; the message says where."""


def expand(text: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """Every host name of `text`, in order, duplicates kept once (first place)."""
    items = [_parse_item(item) for item in _split_top_level(text)]
    total = 0
    for parts in items:
        total += _count(parts)
        if total > limit:
            raise HostListError(f"the host list names more than {limit:,} hosts")
    names: dict[str, None] = {}
    for parts in items:
        names.update(dict.fromkeys(_names(parts)))
    return list(names)


def compress(names: list[str]) -> str:
    """A short form for display, one bracket per prefix and padding (`gpu[001-004,010]`);
    `expand(compress(names))` gives the names back (sorted within a bracket)."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        head = name.rstrip(string.digits)
        digits = name[len(head) :]
        if not digits or len(digits) > 9:
            order.append(name)
            continue
        key = (head, len(digits) if digits.startswith("0") and len(digits) > 1 else 0)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    out = []
    for entry in order:
        if isinstance(entry, str):
            out.append(entry)
            continue
        head, width = entry
        numbers = sorted(set(groups[entry]))
        if len(numbers) == 1:
            out.append(f"{head}{numbers[0]:0{width}d}")
        else:
            out.append(f"{head}[{','.join(_runs(numbers, width))}]")
    return ",".join(out)


def _runs(numbers: list[int], width: int) -> Iterator[str]:
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        yield (
            f"{start:0{width}d}" if start == previous else f"{start:0{width}d}-{previous:0{width}d}"
        )
        if number is not None:
            start = previous = number


# A parsed item is a list of parts: a literal string, or a tuple of the strings a bracket
# stands for (kept lazily as ranges, so counting costs nothing).
Part = str | tuple[tuple[int, int, int], ...] | tuple[str, str]


# One item: name characters and whole brackets; separators: commas and white space.
_ITEM = re.compile(r"(?:[^,\s\[\]]|\[[^\[\]]*\])+")
_SEPARATORS = re.compile(r"[,\s]*")


def _split_top_level(text: str) -> list[str]:
    items, position = [], 0
    while position < len(text):
        position = _SEPARATORS.match(text, position).end()
        if position >= len(text):
            break
        item = _ITEM.match(text, position)
        if item is None:
            raise HostListError(_bracket_problem(text))
        items.append(item.group())
        position = item.end()
        if position < len(text) and text[position] not in ", \t\n\r":
            raise HostListError(_bracket_problem(text))
    return items


def _bracket_problem(text: str) -> str:
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
            if depth > 1:
                return f"a bracket inside a bracket in {text[:200]!r}"
        elif char == "]":
            depth -= 1
            if depth < 0:
                return f"a ']' with no '[' in {text[:200]!r}"
    if depth:
        return f"a '[' is not closed in {text[:200]!r}"
    return f"{text[:200]!r} is not a host list"


def _parse_item(item: str) -> list[Part]:
    parts: list[Part] = []
    rest = item
    while rest:
        opening = rest.find("[")
        if opening < 0:
            parts.append(rest)
            break
        if opening:
            parts.append(rest[:opening])
        closing = rest.index("]", opening)
        parts.append(_parse_bracket(rest[opening + 1 : closing], item))
        rest = rest[closing + 1 :]
    for part in parts:
        if isinstance(part, str) and ("]" in part or not _is_name_text(part)):
            raise HostListError(f"{item!r} is not a host name")
    return parts


def _is_name_text(text: str) -> bool:
    return all(c.isalnum() or c in "-_." for c in text)


def _parse_bracket(body: str, item: str) -> Part:
    if "x" in body and "-" not in body and "," not in body:
        low, _, high = body.partition("x")
        if len(low) != len(high) or not low or not (low + high).isalnum():
            raise HostListError(f"{item!r}: a box needs two coordinates of one length")
        return (low.upper(), high.upper())
    ranges = []
    for piece in body.split(","):
        low, dash, high = piece.partition("-")
        if not low.isdecimal() or (dash and not high.isdecimal()) or len(low) > 9:
            raise HostListError(f"{item!r}: {piece!r} is not a number or a range")
        start, end = int(low), int(high) if dash else int(low)
        if end < start:
            raise HostListError(f"{item!r}: the range {piece!r} runs backwards")
        width = len(low) if len(low) > 1 and low.startswith("0") else 0
        ranges.append((start, end, width))
    return tuple(ranges)


def _choices(part: Part) -> int:
    if isinstance(part, str):
        return 1
    if len(part) == 2 and isinstance(part[0], str):
        low, high = part
        count = 1
        for a, b in zip(low, high, strict=True):
            span = _DIGITS36.index(b) - _DIGITS36.index(a) + 1
            if span < 1:
                raise HostListError(f"the box [{low}x{high}] runs backwards")
            count *= span
        return count
    return sum(end - start + 1 for start, end, _ in part)


def _count(parts: list[Part]) -> int:
    total = 1
    for part in parts:
        total *= _choices(part)
    return total


def _values(part: Part) -> Iterator[str]:
    if isinstance(part, str):
        yield part
    elif len(part) == 2 and isinstance(part[0], str):
        low, high = part
        spans = [
            _DIGITS36[_DIGITS36.index(a) : _DIGITS36.index(b) + 1]
            for a, b in zip(low, high, strict=True)
        ]
        for combination in itertools.product(*spans):
            yield "".join(combination)
    else:
        for start, end, width in part:
            for number in range(start, end + 1):
                yield f"{number:0{width}d}"


def _names(parts: list[Part]) -> Iterator[str]:
    brackets = [p for p in parts if not isinstance(p, str)]
    if len(brackets) == 1 and isinstance(brackets[0][0], tuple):
        # The common case, a prefix, one bracket of numbers and maybe a suffix: no products.
        at = parts.index(brackets[0])
        head, tail = "".join(parts[:at]), "".join(parts[at + 1 :])
        for start, end, width in brackets[0]:
            if width:
                yield from (f"{head}{n:0{width}d}{tail}" for n in range(start, end + 1))
            else:
                yield from (f"{head}{n}{tail}" for n in range(start, end + 1))
        return
    for combination in itertools.product(*(list(_values(part)) for part in parts)):
        yield "".join(combination)
