"""The flight-recorder reading's fast paths (a whole-world job's members told alike in C) say
exactly what the detailed comparison says, on every scenario and on whole-world hangs."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from analysis import agreement, alignment, fr_model
from analysis.parsers.flight_recorder import FrEntry, parse_flight_recorder
from tests.analysis.flight_recorder import side_by_side
from tests.analysis.flight_recorder.scenarios import all_scenarios

SCENARIOS = all_scenarios()


def _detailed(monkeypatch, dumps, world):
    """read_dumps with every fast path off: each rank's entries by sequence number in dicts,
    every sequence number compared member by member, sides found a rank at a time."""
    with monkeypatch.context() as patch:
        patch.setattr(alignment, "_met", lambda seq, profiles, calls, size: False)
        patch.setattr(  # no one-group run
            alignment, "_sorted_entries", lambda d: alignment._sorted_entries_of_groups(d.entries)
        )
        patch.setattr(fr_model.agreement, "alike", lambda entries: False)
        real = alignment._collective_stop
        patch.setattr(
            alignment,
            "_collective_stop",
            lambda group, entries, per_rank, waiting, _kinds: real(
                group, entries, per_rank, waiting, (set(per_rank), set())
            ),
        )
        return alignment.read_dumps(dumps, world)


def _same(fast, slow):
    assert fast.to_json() == slow.to_json()
    assert [s.mismatch for s in fast.stops] == [s.mismatch for s in slow.stops]
    assert fast.last_completed == slow.last_completed


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_fast_reading_is_the_detailed_one_on_every_scenario(scenario, tmp_path, monkeypatch):
    directory = side_by_side.stage(scenario, tmp_path)
    files = sorted(directory.iterdir())
    dumps = [parse_flight_recorder(str(p), p.read_bytes()) for p in files]
    _same(
        alignment.read_dumps(dumps, scenario.world), _detailed(monkeypatch, dumps, scenario.world)
    )


def _entry(seq, **fields) -> dict:
    return {
        "collective_seq_id": seq,
        "profiling_name": "nccl:all_reduce",
        "process_group": ("0", "default_pg"),
        "input_sizes": [[1024]],
        "output_sizes": [[1024]],
        "input_dtypes": ["Float"],
        "output_dtypes": ["Float"],
        "state": "completed",
        "time_created_ns": 1000 + seq,
        **fields,
    }


def _whole_world(world: int, change) -> list:
    """One dump a rank, every pg_config listing the whole world; `change(rank, entries)`
    plants the fault."""
    dumps = []
    for rank in range(world):
        entries = [_entry(seq) for seq in range(1, 7)]
        entries[-1]["state"] = "scheduled"
        change(rank, entries)
        raw = {
            "version": "2.10",
            "rank": rank,
            "pg_config": {
                "0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(world)))}
            },
            "entries": entries,
        }
        dumps.append(parse_flight_recorder(f"trace_rank_{rank}", pickle.dumps(raw, protocol=2)))
    return dumps


def _drop_last(rank, entries):
    if rank == 5:
        del entries[-1]


def _size_at_3(rank, entries):
    if rank == 7:
        entries[2]["input_sizes"] = entries[2]["output_sizes"] = [[2048]]


def _dtype_at_2(rank, entries):
    if rank == 3:
        entries[1]["input_dtypes"] = entries[1]["output_dtypes"] = ["BFloat16"]


def _not_completed_at_4(rank, entries):
    if rank == 9:
        entries[3]["state"] = "started"


def _gap(rank, entries):
    if rank == 2:
        del entries[2]  # #3 forgotten in the middle: not a run


def _coalesced(rank, entries):
    # every rank: #4 is a coalesced group of two ops; rank 11's second op is smaller
    second = dict(entries[3], input_sizes=[[512]], output_sizes=[[512]])
    if rank == 11:
        second["input_sizes"] = second["output_sizes"] = [[256]]
    entries.insert(4, second)


def _everyone_waiting(rank, entries):
    entries[-1]["state"] = "scheduled"


def _invalid_for_all(rank, entries):
    entries[1]["output_sizes"] = [[512]]  # an all_reduce of 1024 into 512, on every rank


def _wrapped(rank, entries):
    for entry in entries:
        entry["record_id"] = 40 + entry["collective_seq_id"]
    if rank == 6:
        entries.clear()  # a wrapped ring that kept nothing of this group: not compared


def _p2p_on_one(rank, entries):
    if rank in (0, 1):
        op = "nccl:send 0->1" if rank == 0 else "nccl:recv 0<-1"
        entries.append(_entry(1, profiling_name=op, is_p2p=True, p2p_seq_id=1, state="scheduled"))


@pytest.mark.parametrize(
    "change",
    [
        _drop_last,
        _size_at_3,
        _dtype_at_2,
        _not_completed_at_4,
        _gap,
        _coalesced,
        _everyone_waiting,
        _invalid_for_all,
        _wrapped,
        _p2p_on_one,
    ],
)
def test_the_fast_reading_is_the_detailed_one_on_whole_world_hangs(change, monkeypatch):
    dumps = _whole_world(48, change)
    fast = alignment.read_dumps(dumps, 48)
    _same(fast, _detailed(monkeypatch, dumps, 48))
    assert fast.stops  # every planted fault (and the hang itself) stops somewhere


def test_a_whole_world_rank_that_never_issued_the_last_collective_is_named():
    reading = alignment.read_dumps(_whole_world(48, _drop_last), 48)
    first = reading.first
    assert (first.kind, first.seq, first.culprits) == ("missing_ranks", 6, (5,))
    assert len(first.victims) == 47


FIELDS = ("op", "input_sizes", "output_sizes", "in_dtypes", "out_dtypes", "in_shapes", "out_shapes")


def _plain() -> FrEntry:
    (dump,) = _whole_world(1, lambda rank, entries: None)
    return dump.entries[0]


@pytest.mark.parametrize("name", FIELDS)
def test_entries_that_differ_in_any_compared_field_are_never_alike(name):
    entry = _plain()
    value = getattr(entry, name)
    other = ((4096,),) if name.endswith("shapes") else ("Half",) if "dtypes" in name else "x"
    changed = dataclasses.replace(entry, **{name: other})
    assert value != other
    assert agreement.alike([entry, entry, changed]) is False
    assert agreement.alike([entry, dataclasses.replace(entry)]) is True


def test_sizes_cut_to_the_same_text_are_not_alike_when_their_shapes_differ():
    # Hostile: two shapes whose text is cut to the same 512 characters.
    long = [[2**61 + n for n in range(32)] for _ in range(32)]
    other = [row[:] for row in long]
    other[-1][-1] += 1
    a, b = (
        parse_flight_recorder(
            f"trace_rank_{i}",
            pickle.dumps({"entries": [_entry(1, input_sizes=s, output_sizes=s)]}, protocol=2),
        ).entries[0]
        for i, s in enumerate((long, other))
    )
    assert a.input_sizes == b.input_sizes and a.in_shapes != b.in_shapes
    assert not agreement.alike([a, b])


def test_the_fields_told_alike_cover_what_compare_and_the_signature_read():
    # _all_alike's fields and the signature's parts are all among CONTENT's.
    assert set(agreement.CONTENT_FIELDS) == set(FIELDS)
    entry = _plain()
    for name in ("op", "input_sizes", "output_sizes", "in_dtypes", "out_dtypes"):
        other = ("Half",) if "dtypes" in name else "y"
        changed = dataclasses.replace(entry, **{name: other})
        assert not agreement._all_alike({0: entry, 1: changed}, entry)


def test_ranks_of_one_pg_config_share_its_reading_and_others_do_not():
    dumps = _whole_world(4, lambda rank, entries: None)
    dumps[3].pg_ranks = {"0": (0, 1, 2, 3), "1": (2, 3)}
    dumps[2].pg_ranks = {"0": tuple(list(dumps[2].pg_ranks["0"]))}  # equal, another tuple
    configured = alignment._configured_by_rank({d.rank: d for d in dumps})
    assert configured[0] is configured[1]
    assert configured[2] == configured[0] and configured[2] is not configured[0]
    assert configured[3] == {"0": (0, 1, 2, 3), "1": (2, 3)}
