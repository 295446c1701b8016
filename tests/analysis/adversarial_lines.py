"""Adversarial evidence lines built from the parsers' own regexes.

For every compiled regex at module level in a parser (and inside its tuples and dicts), its
literal pieces are read from the pattern (re._parser) and assembled into long lines of the
shapes that make a backtracking regex superlinear: a literal followed by a long run of what a
repetition after it accepts, then another literal; the literals repeated back to back; runs of
one character class. A linear parser reads each in time proportional to its length; a
quadratic one does not finish a 1 MB line in hours.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from re import _parser as sre  # the standard library's own pattern parser

# Characters that stand for a class in the pattern: a run of them is what \s*, \d+, \w+, [^)]*
# and friends will swallow.
_CLASS_STAND_IN = {
    "CATEGORY_DIGIT": "7",
    "CATEGORY_SPACE": " ",
    "CATEGORY_WORD": "w",
    "CATEGORY_NOT_SPACE": "x",
    "CATEGORY_NOT_DIGIT": "x",
    "CATEGORY_NOT_WORD": "-",
}
FILLERS = (" ", "7", "w", "\t", "-", ":", "a=", "[")


def module_patterns(module_name: str) -> dict[str, re.Pattern]:
    module = importlib.import_module(module_name)
    found: dict[str, re.Pattern] = {}

    def visit(name: str, value: object, depth: int) -> None:
        if isinstance(value, re.Pattern):
            found[name] = value
        elif depth < 3 and isinstance(value, list | tuple | set | frozenset):
            for index, item in enumerate(value):
                visit(f"{name}[{index}]", item, depth + 1)
        elif depth < 3 and isinstance(value, dict):
            for key, item in value.items():
                visit(f"{name}[{key!r}]", item, depth + 1)

    for name, value in vars(module).items():
        visit(name, value, 0)
    return found


def literals(pattern: re.Pattern) -> list[str]:
    """The pattern's literal runs, in order, plus one stand-in character per class."""
    text = pattern.pattern
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    out: list[str] = []
    _walk(sre.parse(text, pattern.flags & re.IGNORECASE), out)
    return [piece for piece in dict.fromkeys(out) if piece]


def _walk(items, out: list[str]) -> None:
    run: list[str] = []
    for op, arg in items:
        if op is sre.LITERAL:
            run.append(chr(arg))
            continue
        if run:
            out.append("".join(run))
            run = []
        _walk_one(op, arg, out)
    if run:
        out.append("".join(run))


def _walk_one(op, arg, out: list[str]) -> None:
    if op is sre.SUBPATTERN:
        _walk(arg[-1], out)
    elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        _walk(arg[2], out)
    elif op is sre.BRANCH:
        for branch in arg[1]:
            _walk(branch, out)
    elif op is sre.ATOMIC_GROUP:
        _walk(arg, out)
    elif op in (sre.ASSERT, sre.ASSERT_NOT):
        _walk(arg[1], out)
    elif op is sre.IN:
        _class_pieces(arg, out)


def _class_pieces(items, out: list[str]) -> None:
    for kind, value in items:
        if kind is sre.LITERAL:
            out.append(chr(value))
        elif kind is sre.RANGE:
            out.append(chr(value[0]))
        elif kind is sre.CATEGORY:
            out.append(_CLASS_STAND_IN.get(str(value), "x"))


def _fill(piece: str, size: int) -> str:
    return piece * (size // len(piece) + 1)


def lines_for(pattern: re.Pattern, size: int) -> Iterator[str]:
    pieces = literals(pattern) or ["x"]
    first, last = pieces[0], pieces[-1]
    yield _fill("".join(pieces), size)[:size]
    for filler in FILLERS:
        yield first + _fill(filler, size - len(first) - len(last))[: size - 2] + last
    for piece in pieces[1:]:
        yield first + _fill(piece + " ", size)[:size] + last


def adversarial_lines(module_names: list[str], size: int) -> Iterator[tuple[str, str]]:
    """(pattern name, line) for every regex of the modules."""
    for module_name in module_names:
        for name, pattern in module_patterns(module_name).items():
            for line in dict.fromkeys(lines_for(pattern, size)):
                yield f"{module_name}.{name}", line
