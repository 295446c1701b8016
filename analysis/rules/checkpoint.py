"""A rank saving a checkpoint while the others wait for it (issue 17's join).

The save is said by the rank's own log (the line reader's `checkpoint` signal: "Saving
checkpoint ...", "Retrieving optimizer state dict ...") or by its stack (a `save` /
`torch.save` / `*checkpoint*` frame). It is still under way when nothing the rank wrote
after it says the training went on. While it lasts, every other rank sits in the next
collective; once it outlasts the job's collective timeout, their watchdogs fire. The verdict
names the checkpoint and sets its length against that timeout.
"""

from __future__ import annotations

import re
from datetime import datetime
from itertools import compress, repeat
from operator import attrgetter, is_not

from analysis import quotes
from analysis.facts import Facts
from analysis.findings import Finding
from analysis.rankmodel import RankState
from analysis.signals import Signal
from analysis.verdict import Quote, QuoteKind, capitalised, ranks_text

# PyTorch's default collective timeout for NCCL (torch.distributed's default_pg_nccl_timeout).
DEFAULT_TIMEOUT_S = 600.0
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d{1,12})")
_CHECKPOINT = attrgetter("checkpoint")


def _save_frame(state: RankState) -> str:
    for frame in state.stack:
        name = frame.split(" (", 1)[0].rsplit(".", 1)[-1].lower()
        if name.startswith(("save", "_save")) or "checkpoint" in name:
            return frame
    return ""


def _still_saving(facts: Facts, rank: int) -> Signal | None:
    """The rank's checkpoint line, if nothing it logged after says training went on."""
    found = facts.snap.signals.by_rank.get(rank)
    if found is None or found.checkpoint is None:
        return None
    line, last = found.checkpoint, found.last_progress
    if last is not None:
        if line.at is not None and last.at is not None and last.at > line.at:
            return None
        if line.at is None and last.line_no > line.line_no:
            return None
    return line


def collective_timeout(facts: Facts) -> tuple[float, bool]:
    """The job's collective timeout in seconds, and whether its own lines said it."""
    for _, _, fact in facts.snap.watchdog:
        match = _TIMEOUT_MS.search(fact.line)
        if match:
            return int(match.group(1)) / 1000, True
    for found in facts.snap.signals.signalled.values():
        for signal in found.failures:
            match = _TIMEOUT_MS.search(signal.text) if signal.kind == "timeout" else None
            if match:
                return int(match.group(1)) / 1000, True
    return DEFAULT_TIMEOUT_S, False


def checkpoint_save(facts: Facts) -> Finding | None:
    signalled = facts.snap.signals.signalled
    # The ranks with a checkpoint line, picked in C (a few of 32,000 signalled ranks).
    with_line = compress(signalled, map(is_not, map(_CHECKPOINT, signalled.values()), repeat(None)))
    lines = {r: s for r in with_line if (s := _still_saving(facts, r))}
    # A rank writing a checkpoint is outside any collective (the others wait in one).
    frames = {
        r: f
        for r in facts.outside
        if (f := _save_frame(facts.ranks[r])) and facts.ranks[r].process_seen
    }
    saving = sorted(set(lines) | set(frames))
    if not saving or len(saving) > max(1, facts.world // 2):
        return None
    reporters = sorted(
        r
        for r, found in facts.snap.signals.signalled.items()
        if r not in saving and "timeout" in found.kinds
    )
    waiting = reporters or [r for r in facts.in_collective if r not in saving]
    if not waiting:
        return None  # nobody waits for it: a save in its own time
    timeout, stated = collective_timeout(facts)
    began = min((s.at for s in lines.values() if s.at is not None), default=None)
    length = _length(facts, began)
    evidence = [
        Quote(QuoteKind.CHECKPOINT, s.node, r, s.text) for r, s in sorted(lines.items())[:3]
    ]
    evidence += [
        Quote(QuoteKind.STACK, facts.rank_node.get(r), r, f) for r, f in sorted(frames.items())[:3]
    ]
    evidence += _waiting_lines(facts, reporters) or quotes.stack(facts, waiting[0])
    what = _what(lines, frames, saving)
    against = _against(length, timeout, stated, bool(reporters))
    return Finding(
        "A",
        0.9,
        f"{capitalised(ranks_text(saving))} {'is' if len(saving) == 1 else 'are'} saving a "
        f"checkpoint ({what}) while {ranks_text(waiting)} {_wait(len(waiting), bool(reporters))}"
        f": {against}",
        suspects=tuple(saving),
        evidence=tuple(evidence),
        check=(
            f"On {facts.rank_node.get(saving[0], 'its node')}: is the checkpoint file still "
            "growing (`ls -l`, `du -sh` of its directory) and how fast the storage writes; "
            "if saves take longer than the collective timeout, raise the timeout above the "
            "save time or save asynchronously."
        ),
        rule="checkpoint_save",
    )


def _wait(count: int, timed_out: bool) -> str:
    one = count == 1
    waits = "waits" if one else "wait"
    out = (" and times out" if one else " and time out") if timed_out else ""
    return f"{waits} in the next collective{out}"


def _length(facts: Facts, began: datetime | None) -> float | None:
    """How long the save has run, up to the snapshot."""
    if began is None or facts.snap.collected_at is None:
        return None
    return (facts.snap.collected_at - began).total_seconds()


def _what(lines: dict[int, Signal], frames: dict[int, str], saving: list[int]) -> str:
    if saving[0] in lines:
        return f'"{lines[saving[0]].text.strip()[:140]}"'
    return f"in {frames[saving[0]]}"


def _against(length: float | None, timeout: float, stated: bool, timed_out: bool) -> str:
    limit = (
        f"the job's collective timeout ({timeout:g} s)"
        if stated
        else (
            f"PyTorch's default collective timeout ({timeout:g} s; the job's own is not in "
            "its lines)"
        )
    )
    if length is None and timed_out:
        return f"their watchdogs fired after {limit} while it was still under way."
    if length is None:
        return f"how long it has run is not stamped; set it against {limit}."
    if length > timeout:
        return (
            f"it has run {length:.0f} s, longer than {limit}: the others' watchdogs fire "
            "before it ends."
        )
    return f"it has run {length:.0f} s, within {limit}: a slow save, not yet a hang."


def _waiting_lines(facts: Facts, reporters: list[int]) -> list[Quote]:
    out = []
    for rank in reporters[:2]:
        found = facts.snap.signals.by_rank[rank]
        line = next((s for s in found.failures if s.kind == "timeout"), None)
        if line is not None:
            out.append(Quote(QuoteKind.WATCHDOG, line.node, rank, line.text))
    return out
