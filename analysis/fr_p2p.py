"""Point-to-point ops read together: a rank blocked in a send or recv waits for its peer.

torch numbers a group's sends and recvs by one counter per rank (`p2p_seq_id`), not per pair,
so they are matched by peer instead of by number: the op each rank is blocked in, against the
op its peer is blocked in. A rank waiting in a recv whose sender is blocked in nothing was
never sent to: the sender is the culprit, the receiver its victim (and the other way round for
a send). A peer blocked in another op is a victim too, and its own stop names the cause.
"""

from __future__ import annotations

from analysis.fr_model import FrGroup, GroupStop, make_stop, no_dump_line
from analysis.parsers.flight_recorder import FrEntry


def p2p_stops(group: FrGroup, per_rank, waiting) -> list[GroupStop]:
    """A rank blocked in a send or recv of this group waits for its peer: the peer that never
    posted the other half is the culprit (or a victim, when it is blocked elsewhere)."""
    members = sorted(group.members)
    stops = []
    for rank, wait in sorted(waiting.items()):
        if wait.group != group.key or not wait.entry.is_p2p:
            continue
        entry = wait.entry
        peer = _peer(entry, members, rank)
        if peer is None:
            continue
        stop = _p2p_stop(group, rank, entry, peer, per_rank, waiting)
        if stop is not None:
            stops.append(stop)
    return stops


def _peer(entry: FrEntry, members: list[int], rank: int) -> int | None:
    pair = entry.peers
    if pair is None:
        return None
    local = pair[0] if entry.kind == "recv" else pair[1]
    if entry.kind not in ("send", "recv") or not 0 <= local < len(members):
        return None
    peer = members[local]
    return peer if peer != rank else None


def _p2p_stop(group, rank, entry, peer, per_rank, waiting) -> GroupStop | None:
    other = waiting.get(peer)
    wanted = "send" if entry.kind == "recv" else "recv"
    present = {rank: [entry]}
    if (
        other is not None
        and other.group == group.key
        and other.entry.kind == wanted
        and _peer(other.entry, sorted(group.members), peer) == rank
    ):
        return _p2p_pair(group, rank, entry, peer, other.entry, per_rank)
    side = "sender" if entry.kind == "recv" else "receiver"
    waits = f"rank {rank} waits in {entry.op}; its {side}, rank {peer},"

    def unmatched(culprits: tuple[int, ...], text: str, **how) -> GroupStop:
        return make_stop(
            group, entry.seq, "unmatched_p2p", present, culprits, text, dumps=per_rank, **how
        )

    if peer not in per_rank:
        lines = [no_dump_line((peer,), group)]
        return unmatched((peer,), f"{waits} left no dump", without=(peer,), more_lines=lines)
    if other is not None:
        text = f"{waits} waits in group {other.group} #{other.entry.seq} ({other.entry.op}) instead"
        return unmatched((), text, absent=(peer,), elsewhere=(peer,))
    line = f"rank {peer}: no {wanted} to rank {rank} pending in its dump"
    return unmatched(
        (peer,), f"{waits} never posted the {wanted}", absent=(peer,), more_lines=[line]
    )


def _p2p_pair(group, rank, entry, peer, other: FrEntry, per_rank) -> GroupStop | None:
    if rank > peer:
        return None  # the pair is reported once, from its lower rank
    send, recv = (entry, other) if entry.kind == "send" else (other, entry)
    present = {rank: [entry], peer: [other]}
    shapes = (send.in_shapes, recv.out_shapes)
    if None not in shapes and shapes[0] != shapes[1]:
        text = f"send of {send.input_sizes} into a recv of {recv.output_sizes}"
        return make_stop(group, entry.seq, "different_sizes", present, (), text, dumps=per_rank)
    text = f"ranks {min(rank, peer)} and {max(rank, peer)} both wait in their send/recv"
    return make_stop(group, entry.seq, "all_waiting", present, (), text, dumps=per_rank)
