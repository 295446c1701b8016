"""What the ranks of one collective must agree on, op by op.

A collective is a meeting: every member issues the same op at the same sequence number of its
group, with sizes and dtypes the op's own law allows. The laws differ by op: an all_reduce
reduces in place (output = input, on every rank); an all_gather's output is its input times
the group's size, a reduce_scatter's input its output times the group's size; only a gather's
root receives (outputs differ between the root and the others) and only a scatter's root sends;
an all_to_all may send uneven splits, so only its totals over the group must balance.

`compare` takes what each rank ran at one sequence number of one group (one op, or the ops of
a coalesced group) and names the first law broken, with the ranks on each side and the ranks
that broke it. It never guesses between equal sides: a tie is left to the caller, who knows
the other groups.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from operator import attrgetter, itemgetter

from analysis.parsers.flight_recorder import FrEntry

# Reduce in place: output shapes equal input shapes on each rank.
IN_PLACE = frozenset(
    {"all_reduce", "allreduce", "allreduce_coalesced", "all_reduce_coalesced", "all_reduce_barrier"}
)
# Output numel = input numel x group size (the list form's outputs summed).
GATHERING = frozenset(
    {
        "all_gather",
        "_all_gather_base",
        "_allgather_base",
        "all_gather_into_tensor",
        "all_gather_into_tensor_coalesced",
        "allgather_into_tensor_coalesced",
    }
)
# Input numel = output numel x group size.
SCATTERING = frozenset(
    {
        "reduce_scatter",
        "_reduce_scatter_base",
        "reduce_scatter_tensor",
        "reduce_scatter_tensor_coalesced",
    }
)
# Per-rank sizes may legitimately differ; an all_to_all's totals must still balance.
ALL_TO_ALL = frozenset(
    {"all_to_all", "all_to_all_single", "all_to_all_v_single", "alltoall", "alltoall_base"}
)
UNEVEN = ALL_TO_ALL | {"all_gather_v", "reduce_scatter_v"}
# Rooted: only the root receives (gather) or sends (scatter).
ROOT_RECEIVES = frozenset({"gather"})
ROOT_SENDS = frozenset({"scatter"})
# A non-root's buffer of these may carry any dtype torch records for it.
NO_OWN_DTYPE_LAW = frozenset({"gather", "scatter", "broadcast", "_broadcast_oop"})


@dataclass(frozen=True)
class Disagreement:
    """The first law one collective's ranks broke."""

    # different_collective | different_sizes | different_dtypes | invalid_sizes | invalid_dtypes
    kind: str
    op_index: int  # which op of a coalesced group (0 for a lone op)
    sides: tuple[tuple[int, ...], ...]  # ranks that ran alike, largest side first
    culprits: tuple[int, ...]  # ranks that broke it; () when the sides are equal
    detail: str


def compare(calls: dict[int, list[FrEntry]], group_size: int | None) -> Disagreement | None:
    """The first law broken by what each rank ran at one sequence number, or None."""
    lengths = set(map(len, calls.values()))  # in C: a whole-world group's ranks are many
    for index in range(max(lengths)):
        if len(lengths) == 1:
            at = dict(zip(calls, map(itemgetter(index), calls.values()), strict=True))
            short: tuple[int, ...] = ()
        else:
            at = {rank: ops[index] for rank, ops in calls.items() if index < len(ops)}
            short = tuple(sorted(set(calls) - set(at)))
        if short:
            return _sides(
                "different_collective",
                index,
                {r: f"{calls[r][0].op} x{len(calls[r])}" for r in calls},
                f"a coalesced group of different lengths: {len(at)} ranks ran op {index + 1}, "
                f"{len(short)} did not",
            )
        found = _compare_one(at, index, group_size)
        if found is not None:
            return found
    return None


# Every field `_all_alike` compares, and the shapes the laws read: entries alike in all of
# them are alike for `compare`, and one's law is every one's.
CONTENT_FIELDS = (
    "op",
    "input_sizes",
    "output_sizes",
    "in_dtypes",
    "out_dtypes",
    "in_shapes",
    "out_shapes",
)
_CONTENT = attrgetter(*CONTENT_FIELDS)


def alike(entries: list[FrEntry]) -> bool:
    """Every entry equal to the first in every CONTENT_FIELDS field: their tuples counted in C
    (thousands of ranks at each sequence number), not compared an entry at a time."""
    contents = list(map(_CONTENT, distinct(entries)))
    return not contents or contents.count(contents[0]) == len(contents)


def distinct(entries) -> list[FrEntry]:
    """The entries, each object once, in C: a node's ranks alike hold one object
    (`analysis.fr_shared`), so a whole-world group's ranks give a few thousand, not 32,000."""
    entries = list(entries)
    return list(dict(zip(map(id, entries), entries, strict=True)).values())


def lawful_alone(entry: FrEntry, size: int | None) -> bool:
    """What `compare` finds when every rank ran this very entry: nothing (an all_to_all's
    totals need the ranks: not told here)."""
    return entry.kind not in ALL_TO_ALL and _law_of(entry, size) is None


def _compare_one(at: dict[int, FrEntry], index: int, size: int | None) -> Disagreement | None:
    first = next(iter(at.values()))
    if _all_alike(at, first):
        # The common case (every rank ran the very same thing): one rank's law for all, and
        # the same call is judged once for every group and sequence number it recurs at.
        law = _law_of(first, size)
        if law is not None:
            kind, why = law
            return Disagreement(kind, index, (tuple(sorted(at)),), (), why)
        return _totals(at, first.kind, index, size) if first.kind in ALL_TO_ALL else None
    kinds = {rank: entry.kind for rank, entry in at.items()}
    if len(set(kinds.values())) > 1:
        return _sides("different_collective", index, {r: at[r].op for r in at}, "different ops")
    kind = next(iter(kinds.values()))
    if _is_marker(at):
        return None
    return (
        _own_law(at, kind, index, size)
        or _sizes_across(at, kind, index)
        or _dtypes_across(at, kind, index)
        or _totals(at, kind, index, size)
    )


# (op, sizes, dtypes, group size) -> the law one such call breaks on its own: (kind, why).
_LAWS: dict[tuple, tuple[str, str] | None] = {}
_LAWS_KEPT = 4096


def _law_of(entry: FrEntry, size: int | None) -> tuple[str, str] | None:
    e = entry
    key = (e.op, e.input_sizes, e.output_sizes, e.in_dtypes, e.out_dtypes, size)
    if key in _LAWS:
        return _LAWS[key]
    found = None
    if not _is_marker({0: entry}):
        broken = _own_law({0: entry}, entry.kind, 0, size)
        found = (broken.kind, broken.detail) if broken is not None else None
    if len(_LAWS) >= _LAWS_KEPT:
        _LAWS.clear()
    _LAWS[key] = found
    return found


def _all_alike(at: dict[int, FrEntry], first: FrEntry) -> bool:
    """Every rank ran the very same thing (one loop: this runs once per rank and collective)."""
    op, ins, outs, in_types, out_types = (
        first.op,
        first.input_sizes,
        first.output_sizes,
        first.in_dtypes,
        first.out_dtypes,
    )
    for e in distinct(at.values()):
        if (
            e.op != op
            or e.input_sizes != ins
            or e.output_sizes != outs
            or e.in_dtypes != in_types
            or e.out_dtypes != out_types
        ):
            return False
    return True


def _is_marker(at: dict[int, FrEntry]) -> bool:
    """The entry that closes a coalesced group ("coalesced", "ALLGATHER_coalesced"): no sizes."""
    entry = next(iter(at.values()))
    if not entry.kind.endswith("coalesced"):
        return False
    return all(not any(e.in_shapes or ()) and not any(e.out_shapes or ()) for e in at.values())


def _own_law(at: dict[int, FrEntry], kind: str, index: int, size: int | None):
    """Each rank's entry against its op's own law: sizes, then dtypes."""
    broken = {r: why for r, e in at.items() if (why := _own_sizes(e, kind, size))}
    found_kind = "different_sizes"
    if not broken:
        broken = {r: why for r, e in at.items() if (why := _own_dtypes(e, kind))}
        found_kind = "different_dtypes"
    if not broken:
        return None
    ranks = tuple(sorted(broken))
    others = tuple(sorted(set(at) - set(broken)))
    why = broken[ranks[0]]
    if not others:
        # Every rank calls it so: the call itself is wrong, no rank differs from the others.
        kind = "invalid_sizes" if found_kind == "different_sizes" else "invalid_dtypes"
        return Disagreement(kind, index, (ranks,), (), f"every rank: {why}")
    return Disagreement(found_kind, index, (others, ranks), ranks, why)


def _own_sizes(entry: FrEntry, kind: str, size: int | None) -> str:
    ins, outs = entry.in_shapes, entry.out_shapes
    if ins is None or outs is None:
        return ""
    if kind in IN_PLACE and ins != outs:
        return f"{kind} input {entry.input_sizes} but output {entry.output_sizes}"
    if not size:
        return ""
    if kind in GATHERING and _numel(outs) != _numel(ins) * size:
        return (
            f"{kind} output of {_numel(outs)} elements for {_numel(ins)} in from each of "
            f"{size} ranks"
        )
    if kind in SCATTERING and _numel(ins) != _numel(outs) * size:
        return f"{kind} input of {_numel(ins)} elements for {_numel(outs)} out on each of {size}"
    return ""


def _own_dtypes(entry: FrEntry, kind: str) -> str:
    if kind in NO_OWN_DTYPE_LAW or not entry.in_dtypes or not entry.out_dtypes:
        return ""
    if not (_has_data(entry.in_shapes) and _has_data(entry.out_shapes)):
        return ""
    if set(entry.in_dtypes) != set(entry.out_dtypes):
        return f"{kind} of {'/'.join(entry.in_dtypes)} into {'/'.join(entry.out_dtypes)}"
    return ""


def _sizes_across(at: dict[int, FrEntry], kind: str, index: int) -> Disagreement | None:
    if kind in UNEVEN:
        return None
    keys = {}
    for rank, entry in at.items():
        ins = "" if kind in ROOT_SENDS else entry.input_sizes
        outs = "" if kind in ROOT_RECEIVES else entry.output_sizes
        keys[rank] = f"in={ins} out={outs}"
    if len(set(keys.values())) < 2:
        return None
    return _sides("different_sizes", index, keys, f"{kind} with different sizes")


def _dtypes_across(at: dict[int, FrEntry], kind: str, index: int) -> Disagreement | None:
    keys = {}
    for rank, entry in at.items():
        ins = () if kind in ROOT_SENDS | {"broadcast", "_broadcast_oop"} else entry.in_dtypes
        outs = () if kind in ROOT_RECEIVES else entry.out_dtypes
        keys[rank] = "/".join(sorted(set(ins) | set(outs)))
    known = {rank: key for rank, key in keys.items() if key}
    if len(set(known.values())) < 2:
        return None
    return _sides("different_dtypes", index, known, f"{kind} of different dtypes")


def _totals(at: dict[int, FrEntry], kind: str, index: int, size: int | None):
    """An uneven all_to_all: what the group sends in all must be what it receives in all."""
    if kind not in ALL_TO_ALL or (size and len(at) < size):
        return None
    if any(e.in_shapes is None or e.out_shapes is None for e in at.values()):
        return None
    sent = sum(_numel(e.in_shapes) for e in at.values())
    received = sum(_numel(e.out_shapes) for e in at.values())
    if sent == received:
        return None
    ranks = tuple(sorted(at))
    return Disagreement(
        "different_sizes",
        index,
        (ranks,),
        (),
        f"{kind}: the group sends {sent} elements in all and receives {received}",
    )


def _sides(kind: str, index: int, keys: dict[int, str], detail: str) -> Disagreement:
    by_key: dict[str, list[int]] = defaultdict(list)
    for rank, key in keys.items():
        by_key[key].append(rank)
    sides = sorted((tuple(sorted(ranks)) for ranks in by_key.values()), key=lambda s: (-len(s), s))
    tie = len(sides) > 1 and len(sides[0]) == len(sides[1])
    culprits = () if tie else tuple(sorted(r for side in sides[1:] for r in side))
    return Disagreement(kind, index, tuple(sides), culprits, detail)


def _numel(shapes: tuple) -> int:
    return sum(math.prod(shape) for shape in shapes)


def _has_data(shapes: tuple | None) -> bool:
    return bool(shapes) and any(shape for shape in shapes)
