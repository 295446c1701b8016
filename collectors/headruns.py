"""The diagnosis head as stored: its long lists of ranks written as runs.

At 32,000 ranks a stack group's `rank_list` and the flight recorder's stop (`victims` and its
collective's `rank_list`, each twice: the stop and `first_mismatch`) are five lists of ~32,000
ints, 1.07 MB of the head's 1.29 MB of JSON: PostgreSQL's jsonb input of the verdict's UPDATE
(~70 ms) and every page's read of the head (~40 ms) were mostly them. Stored, a strictly
ascending list of ints (no bool) of RUNS_FROM or more that its runs make at least twice
shorter is `{RUNS: [lo, hi, lo, hi, ...]}`, and the head says so (`RUNS: 1` at its top):
read back, it is the same list again, so every reader (pages, API, exports, post-mortems,
`Diagnosis.from_json`) sees the head as it was made. A head holding a dict keyed RUNS of its
own is stored as it is (and then not flagged), so a flagged head's RUNS dicts are all runs.
Pure functions (collectors/models.py's `DiagnosisField` calls them).
"""

from __future__ import annotations

from itertools import islice
from operator import lt

RUNS = "$runs"
RUNS_FROM = 64
# A stored run past this many ranks in all is not read back as a list (nor is its head's
# reader made to build one): no job has it, and the stored JSON is the console's own.
MOST_RANKS = 1 << 22
MOST_RUNS = 1024  # more runs than this stay a list (scattered ranks: not worth it)

_INT = frozenset({int})
_CONTAINERS = (dict, list)


def stored(head):
    """The head as it is stored (a new object where anything changed; `head` is untouched)."""
    if not isinstance(head, dict):
        return head
    try:
        made, changed = _runs_in(head)
    except _OwnRunsKey:
        return head
    return {RUNS: 1, **made} if changed else head


def read(head):
    """The head as it was made, from its stored form (any other value as it is)."""
    if not isinstance(head, dict) or head.get(RUNS) != 1:
        return head
    return _lists_in({k: v for k, v in head.items() if k != RUNS})


class _OwnRunsKey(Exception):
    """The head holds a dict keyed RUNS of its own: stored as it is."""


def _runs_in(value) -> tuple[object, bool]:
    if isinstance(value, dict):
        if RUNS in value:
            raise _OwnRunsKey
        out, changed = {}, False
        for key, item in value.items():
            out[key], moved = _runs_in(item)
            changed = changed or moved
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        kinds = set(map(type, value))
        if kinds == _INT:
            runs = _runs_of(value)
            return ({RUNS: runs}, True) if runs is not None else (value, False)
        if not any(issubclass(kind, _CONTAINERS) for kind in kinds):
            return value, False
        made = [_runs_in(item) for item in value]
        if any(moved for _, moved in made):
            return [item for item, _ in made], True
    return value, False


def _runs_of(items: list[int]) -> list[int] | None:
    """[lo, hi, ...] of a strictly ascending list of ints worth it, else None."""
    if len(items) < RUNS_FROM or not all(map(lt, items, islice(items, 1, None))):
        return None
    breaks: list[int] = []
    if not _breaks_between(items, 0, len(items) - 1, breaks, min(MOST_RUNS, len(items) // 4)):
        return None
    runs = [items[0]]
    for at in breaks:
        runs += (items[at - 1], items[at])
    runs.append(items[-1])
    return runs


def _breaks_between(items: list[int], lo: int, hi: int, breaks: list[int], most: int) -> bool:
    """The positions in (lo, hi] whose value is not its predecessor's plus one, added to
    `breaks` in order; False past `most`. Strictly ascending, items[lo:hi + 1] is one run
    exactly when its ends are hi - lo apart: halved only where they are not."""
    if items[hi] - items[lo] == hi - lo:
        return True
    if hi - lo == 1:
        breaks.append(hi)
        return len(breaks) < most
    mid = (lo + hi) // 2
    return _breaks_between(items, lo, mid, breaks, most) and _breaks_between(
        items, mid, hi, breaks, most
    )


def _lists_in(value):
    if isinstance(value, dict):
        if len(value) == 1 and RUNS in value:
            made = _list_of(value[RUNS])
            return value if made is None else made
        return {key: _lists_in(item) for key, item in value.items()}
    if isinstance(value, list) and any(isinstance(item, _CONTAINERS) for item in value):
        return [_lists_in(item) for item in value]
    return value


def _list_of(runs) -> list[int] | None:
    """The list stored as `runs`, or None if they are not runs this module wrote."""
    if not isinstance(runs, list) or len(runs) % 2 or not _INT.issuperset(map(type, runs)):
        return None
    if not all(map(lt, islice(runs, 1, None, 2), islice(runs, 2, None, 2))):
        return None  # each run starts past the end of the one before
    pairs = list(zip(runs[::2], runs[1::2], strict=True))
    if any(lo > hi for lo, hi in pairs) or sum(hi - lo + 1 for lo, hi in pairs) > MOST_RANKS:
        return None
    made: list[int] = []
    for lo, hi in pairs:
        made.extend(range(lo, hi + 1))
    return made
