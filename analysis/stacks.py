"""Stack signatures, the innermost relevant frame, and grouping ranks by stack."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from analysis.parsers.pyspy import Frame

# torch.distributed entry points: a rank whose stack holds one of these waits in a meeting.
COLLECTIVES = frozenset(
    {
        "all_reduce",
        "all_reduce_coalesced",
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "_all_gather_base",
        "all_gather_coalesced",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "all_to_all",
        "all_to_all_single",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
        "send",
        "recv",
        "isend",
        "irecv",
        "batch_isend_irecv",
        "destroy_process_group",
    }
)
INIT_FRAMES = frozenset(
    {
        "init_process_group",
        "init_device_mesh",
        "_create_c10d_store",
        "_env_rendezvous_handler",
        "_tcp_rendezvous_handler",
        "_store_based_barrier",
        "next_rendezvous",
        "_rendezvous",
        "rendezvous",
    }
)
# Frames that say nothing about where the program is: decorators and thread plumbing.
_PLUMBING = frozenset(
    {"wrapper", "_wrapped", "inner", "decorate_context", "run", "_bootstrap", "_bootstrap_inner"}
)


def base_name(function: str) -> str:
    """`_exception_logger.<locals>.wrapper` -> `wrapper`; `SlowLoader.__next__` -> `__next__`."""
    return function.rsplit(".", 1)[-1]


def relevant_frame(frames: list[Frame]) -> Frame | None:
    """The frame an SRE should read first; frames are innermost first."""
    if not frames:
        return None
    # base_name inlined: this runs for every rank of every snapshot.
    for frame in frames:
        if frame.name.rsplit(".", 1)[-1] in COLLECTIVES:
            return frame
    init = [f for f in frames if f.name.rsplit(".", 1)[-1] in INIT_FRAMES]
    if init:
        named = [f for f in init if f.name.rsplit(".", 1)[-1] == "init_process_group"]
        return named[0] if named else init[-1]
    for frame in frames:
        if frame.name.rsplit(".", 1)[-1] == "__next__":
            return frame
    for frame in frames:
        if frame.name.rsplit(".", 1)[-1] not in _PLUMBING and not frame.filename.startswith(
            "threading"
        ):
            return frame
    return frames[0]


def frame_kind(frame: Frame | None) -> str:
    """`collective`, `init`, or `outside` (CPU side: data, I/O, Python)."""
    if frame is None:
        return ""
    name = base_name(frame.name)
    if name in COLLECTIVES:
        return "collective"
    if name in INIT_FRAMES:
        return "init"
    return "outside"


def stack_signature(frames: Iterable[Frame]) -> str:
    """Short, stable hash of the call path (function, file, line), independent of pid/host."""
    # One update over the joined lines hashes the same bytes as one update per frame.
    # surrogatepass: a py-spy JSON "\ud800" escape reaches here as a lone surrogate.
    text = "".join([f"{frame.name}\0{frame.filename}\0{frame.line}\n" for frame in frames])
    digest = hashlib.sha1(text.encode(errors="surrogatepass"), usedforsecurity=False)
    return digest.hexdigest()[:12]


def compact_ranks(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    return compact_ordered(sorted(set(ranks)))


def compact_ordered(ordered: list[int]) -> str:
    """compact_ranks of ranks sorted and distinct already."""
    parts = []
    start, count = 0, len(ordered)
    last = count - 1
    while start < count:
        first = ordered[start]
        if start == last or ordered[start + 1] != first + 1:  # alone (every 8th rank): no gallop
            parts.append(str(first))
            start += 1
            continue
        end = _run_end(ordered, start)
        parts.append(f"{first}-{ordered[end]}")
        start = end + 1
    return ", ".join(parts)


def _run_end(ordered: list[int], start: int) -> int:
    """The index of the last rank of the run of consecutive ranks from `start`: galloped
    to, then bisected (32,000 ranks in a few runs cost a few dozen steps, not 32,000)."""
    first, count = ordered[start], len(ordered)
    # In the run: ordered[i] == first + (i - start), true up to its end (distinct, sorted).
    last, step = start, 1
    while last + step < count and ordered[last + step] == first + last + step - start:
        last += step
        step *= 2
    beyond = min(last + step, count)  # out of the run, or past the end
    while beyond - last > 1:
        middle = (last + beyond) // 2
        if ordered[middle] == first + middle - start:
            last = middle
        else:
            beyond = middle
    return last


def nodes_of(ranks: Iterable[int], rank_node: Mapping[int, str]) -> set[str]:
    """The nodes the ranks run on, "?" for a rank of no known node."""
    nodes = set(map(rank_node.get, ranks))
    if None in nodes:
        nodes.discard(None)
        nodes.add("?")
    return nodes
