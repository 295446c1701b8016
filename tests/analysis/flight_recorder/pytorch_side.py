"""PyTorch's own analyzer (torch.distributed.flight_recorder, torch 2.13) on a directory of dumps,
and its answer in the classes the scenarios compare.

It is run the way `python -m torch.distributed.flight_recorder.fr_trace DIR` runs it: its
`read_dir` loads every dump of the directory, its `build_db` matches the collectives. Two
choices are ours, both in its favour: the dumps are handed over in rank order (its culprit is
"any rank but the first one read", and the first one read is whatever the file system lists
first), and when it refuses a directory with missing dumps it is run again with
`--allow-incomplete-ranks`, as its error message suggests. Its answer is the first collective it
did not pass: the missing ranks it names, else the ranks of its mismatch report and the error
type. A raised exception is its answer too ("crashed: ...").
"""

from __future__ import annotations

import io
import logging
import os
import re
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

# PyTorch's MatchState -> the scenarios' classes.
STATE_CLASS = {
    "COLLECTIVE_TYPE_MISMATCH": "collective",
    "SIZE_OR_SYNTAX_MISMATCH": "sizes",
    "COLLECTIVE_DTYPE_MISMATCH": "dtypes",
    "COLLECTIVE_STATE_MISMATCH": "state",
}


@dataclass(frozen=True)
class Answer:
    kind: str | None  # a scenario class, None for "every collective passed"
    pg: str = ""
    seq: int | None = None
    culprits: tuple[int, ...] = ()
    crashed: str = ""  # the exception, when it raised one
    note: str = ""

    def text(self) -> str:
        if self.crashed:
            return f"crashed: {self.crashed}"
        if self.kind is None:
            return "all met" + (f" ({self.note})" if self.note else "")
        who = ", ".join(map(str, self.culprits)) or "no rank"
        note = f" ({self.note})" if self.note else ""
        return f"{self.kind} at {self.pg} #{self.seq}; culprit {who}{note}"


def analyse(directory: Path) -> Answer:
    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    logging.getLogger("Flight Recorder").setLevel(logging.CRITICAL)
    args = JobConfig().parse_args([str(directory)])
    note = ""
    try:
        details, version = read_dir(args)
        details = dict(sorted(details.items(), key=lambda kv: kv[1]["rank"]))
        try:
            db = _quietly(build_db, _copy(details), args, version)
        except AssertionError as exc:
            if "Missing dump files" not in str(exc):
                raise
            args = JobConfig().parse_args([str(directory), "--allow-incomplete-ranks"])
            note = "with --allow-incomplete-ranks"
            db = _quietly(build_db, _copy(details), args, version)
    except Exception as exc:  # its failure is its answer
        # Sets in its messages print in hash order: shown as {…} so the text is stable.
        message = re.sub(r"\{[^{}]*\}", "{…}", str(exc))[:120]
        return Answer(None, crashed=f"{type(exc).__name__}: {message}")
    finally:
        os.environ.pop("FR_TRACE_VERBOSE_OUTPUT", None)
    return _first_failure(db, note)


def _quietly(function, *args):
    with redirect_stdout(io.StringIO()):
        return function(*args)


def _copy(details: dict) -> dict:
    """build_db pops the entries it matches: give it its own lists."""
    return {
        name: {**dump, "entries": [dict(e) for e in dump["entries"]]}
        for name, dump in details.items()
    }


def _first_failure(db, note: str) -> Answer:
    for collective in db.collectives:
        missing = collective.missing_ranks
        if missing:
            return Answer(
                "missing",
                str(collective.group_id),
                _seq(collective),
                tuple(sorted(missing)),
                note=note,
            )
        if collective.pass_check:
            continue
        reports = collective.mismatch_collectives or {}
        states = {
            STATE_CLASS.get(c.type_of_mismatch.state.name, c.type_of_mismatch.state.name)
            for c in reports.values()
            if c.type_of_mismatch is not None
        }
        kind = sorted(states)[0] if states else "sizes"  # all_to_all totals: no error type
        return Answer(
            kind, str(collective.group_id), _seq(collective), tuple(sorted(reports)), note=note
        )
    return Answer(None, note=note)


def _seq(collective) -> int | None:
    is_p2p = collective.collective_name.split(":")[-1].split(" ")[0] in ("send", "recv")
    value = collective.p2p_seq_id if is_p2p else collective.collective_seq_id
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
