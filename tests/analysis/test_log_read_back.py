"""A node's logs as the merge reads them back: a log's facts' empty parts are one shared empty
(a tuple, a frozenset) that fails loudly if written, a class that does not ask for that keeps
a fresh empty a row, and the short form of one record a row is checked like the long one."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import ClassVar

import pytest

from analysis import codec
from analysis.nodemap import LogParse
from analysis.parsers.logs import LogFacts, StepRecord, parse_log
from analysis.rankmodel import StepSummary

STEP = "2026-12-02 12:00:0{s},000 INFO [rank{r}] host=h step={s} loss=1.0 step_time=0.5s\n"


def _logs(ranks: int = 3) -> list[LogParse]:
    out = []
    for rank in range(ranks):
        text = "".join(STEP.format(r=rank, s=s) for s in range(1, 4))
        facts = parse_log(f"/logs/rank{rank}.log", text)
        summary = StepSummary(rank, 3, datetime(2026, 12, 2, 12, 0, 3, tzinfo=UTC), 0.5, 1.0)
        out.append(LogParse(dataclasses.replace(facts, steps=[]), True, False, None, [summary]))
    return out


def _read_back(logs: list[LogParse]) -> list[LogParse]:
    stored = json.loads(json.dumps(codec.encode(logs, list[LogParse])))
    return codec.decode(stored, list[LogParse])


def test_a_read_back_logs_empty_parts_are_one_shared_immutable_empty():
    logs = _logs()
    back = _read_back(logs)
    first, second = back[0].facts, back[1].facts
    assert first.steps == () and first.errors == () and first.named_ranks == frozenset()
    assert first.errors is second.errors and first.named_ranks is second.named_ranks
    with pytest.raises(AttributeError):
        first.errors.append(None)  # written after the read back: loud, never shared silently
    with pytest.raises(AttributeError):
        first.named_ranks.add(3)
    # What parse_log builds is its own to fill, and a read back stores as it was read:
    assert logs[0].facts.errors == [] and logs[0].facts.errors is not logs[1].facts.errors
    assert codec.encode(back, list[LogParse]) == codec.encode(logs, list[LogParse])
    assert [b.facts.path for b in back] == [f"/logs/rank{r}.log" for r in range(3)]
    assert [b.steps for b in back] == [x.steps for x in logs]


@dataclasses.dataclass
class _Shared:
    CODEC_SHARED_EMPTIES: ClassVar[bool] = True
    name: str
    lines: list[StepRecord] = dataclasses.field(default_factory=list)
    ranks: set[int] = dataclasses.field(default_factory=set)
    hosts: dict[str, list[int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Own:
    name: str
    lines: list[StepRecord] = dataclasses.field(default_factory=list)


def test_only_a_class_that_asks_shares_its_empties_and_maps_stay_fresh():
    shared = codec.decode(codec.encode([_Shared("a"), _Shared("b")], list[_Shared]), list[_Shared])
    assert shared[0].lines is shared[1].lines == ()
    assert shared[0].ranks is shared[1].ranks == frozenset()
    assert shared[0].hosts == {} and shared[0].hosts is not shared[1].hosts
    own = codec.decode(codec.encode([_Own("a"), _Own("b")], list[_Own]), list[_Own])
    assert own[0].lines == [] and own[0].lines is not own[1].lines


@pytest.mark.parametrize(
    "damage",
    [
        lambda c: c[0].__setitem__(0, 2),  # one row says two records, the records are three
        lambda c: c[0].__setitem__(0, True),  # a length, not a number
        lambda c: c[1].__setitem__(0, 4),  # four records for lengths that add up to three
        lambda c: c[1].__setitem__(0, 2),  # two records for three rows of one
        lambda c: c[1][1].__setitem__(0, "0"),  # a summary's rank as text
    ],
)
def test_one_record_a_row_is_checked_as_any_other_lists(damage):
    """A column of lists of records whose every row holds one (a log's step summary) is read
    by a short path: the same refusals as the long one."""
    stored = json.loads(json.dumps(codec.encode(_logs(), list[LogParse])))
    column = stored[5]  # LogParse.steps: [each row's length, the summaries as columns]
    assert column[0] == [1, 1, 1]
    damage(column)
    with pytest.raises(codec.CodecError):
        codec.decode(stored, list[LogParse])


def test_a_log_of_more_than_steps_keeps_what_it_holds():
    text = STEP.format(r=0, s=1) + "RuntimeError: NCCL error in: x\n"
    back = _read_back([LogParse(parse_log("/logs/rank0.log", text), True, False, None, [])])
    assert isinstance(back[0].facts, LogFacts) and type(back[0].facts.errors) is list
    assert [e.line for e in back[0].facts.errors] == ["RuntimeError: NCCL error in: x"]
