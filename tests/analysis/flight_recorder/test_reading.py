"""What the reader takes from each entry (dtypes, state, shapes, peers, groups), bounded, and how
the dumps read together look to the rest of the analysis."""

from __future__ import annotations

import pickle

from analysis.alignment import read_dumps
from analysis.fr_records import FlightRecorderSummary
from analysis.parsers.flight_recorder import MAX_TEXT_CHARS, parse_flight_recorder
from tests.analysis.flight_recorder import torch_format
from tests.analysis.flight_recorder.scenarios import SAMPLES, Scenario, issue_scenarios
from tests.analysis.flight_recorder.torch_format import Op, Rank


def _entry_blob(**fields) -> bytes:
    entry = {
        "collective_seq_id": 1,
        "profiling_name": "nccl:all_reduce",
        "process_group": ("0", "default_pg"),
        "input_sizes": [[4]],
        "output_sizes": [[4]],
        "state": "completed",
        **fields,
    }
    return pickle.dumps({"version": "2.10", "entries": [entry]}, protocol=2)


def _entries(**fields):
    return parse_flight_recorder("trace_rank_0", _entry_blob(**fields)).entries


def _one(**fields):
    (entry,) = _entries(**fields)
    return entry


def _scenario(name: str) -> Scenario:
    return next(s for s in issue_scenarios() if s.name == name)


def test_it_reads_every_field_torch_2_13_writes(tmp_path):
    ranks = [Rank(0, [Op("all_reduce", 3, ((8, 16),), state="started", dtype="BFloat16")])]
    (path,) = torch_format.write(tmp_path, ranks, world=2)
    dump = parse_flight_recorder(str(path), path.read_bytes())
    (entry,) = dump.entries
    assert (entry.pg, entry.pg_desc, dump.first_record_id, dump.wrapped) == (
        "0",
        "default_pg",
        0,
        False,
    )
    assert (entry.seq, entry.kind, entry.state, entry.started, entry.completed) == (
        3,
        "all_reduce",
        "started",
        True,
        False,
    )
    assert entry.in_shapes == ((8, 16),) and entry.in_dtypes == ("BFloat16",)
    assert dump.pg_ranks == {"0": (0, 1)} and dump.pg_desc == {"0": "default_pg"}
    assert entry.signature == "nccl:all_reduce in=[[8,16]] out=[[8,16]] dtype=BFloat16"


def test_a_real_gloo_entry_is_done_when_retired_and_never_started():
    path = SAMPLES / "tp-mismatch" / "fr" / "trace_rank_3"
    dump = parse_flight_recorder(str(path), path.read_bytes())
    last = dump.entries[-1]
    assert (last.op, last.pg, last.pg_desc, last.seq) == (
        "gloo:all_gather",
        "4",
        "TENSOR_MODEL_PARALLEL_GROUP",
        6,
    )
    assert last.out_shapes == ((2, 256),) and last.in_dtypes == ("Float",)
    assert not last.completed and not last.started
    assert all(e.completed for e in dump.entries[:-1])  # retired, though "scheduled"


def test_send_and_recv_name_their_peers_as_group_ranks():
    assert _one(profiling_name="nccl:send 0->3", is_p2p=True, p2p_seq_id=2).peers == (0, 3)
    recv = _one(profiling_name="nccl:recv 3<-0", is_p2p=True, p2p_seq_id=2)
    assert (recv.peers, recv.seq, recv.kind) == ((0, 3), 2, "recv")
    assert _one(profiling_name="nccl:send " + "9" * 40 + "->1").peers is None


def test_every_new_field_is_bounded():
    many = _one(input_dtypes=["Float"] * 10_000, output_dtypes=["x" * 10_000])
    assert many.in_dtypes == () and many.out_dtypes == ()
    odd = _one(input_dtypes=[1, None], output_dtypes={"a": 1})
    assert odd.in_dtypes == () and odd.out_dtypes == ()
    wide = _one(input_sizes=[[1] * 10_000], output_sizes=[[[[1]]]])
    assert wide.in_shapes is None and wide.out_shapes is None
    assert len(wide.input_sizes) <= MAX_TEXT_CHARS
    assert _entries(collective_seq_id="9" * 25) == []  # no sequence id: not an entry
    huge = parse_flight_recorder("trace_rank_0", _entry_blob(record_id=2**70))
    assert huge.first_record_id is None and not huge.wrapped
    ranks = "[" + ", ".join(str(r) for r in (5, 2**40, -1, 3, 3)) + "]"
    blob = pickle.dumps({"entries": [], "pg_config": {"0": {"ranks": ranks}}})
    assert parse_flight_recorder("trace_rank_0", blob).pg_ranks == {"0": (3, 5)}


def test_sequence_ids_and_statuses_written_as_text_are_read_as_numbers():
    dump = parse_flight_recorder("trace_rank_0", _entry_blob(collective_seq_id="7", record_id="11"))
    assert (dump.entries[0].seq, dump.first_record_id, dump.wrapped) == (7, 11, True)
    assert _entries(collective_seq_id="7²") == []  # not an ASCII number: not an entry


def _read(name: str, tmp_path):
    scenario = _scenario(name)
    paths = torch_format.write(tmp_path, list(scenario.ranks), scenario.world)
    dumps = [parse_flight_recorder(str(p), p.read_bytes()) for p in paths]
    return read_dumps(dumps, scenario.world)


def test_a_stop_carries_culprits_victims_and_the_lines_naming_them(tmp_path):
    reading = _read("sequence-tie-across-groups", tmp_path)
    first = reading.first
    assert (first.group.key, first.seq, first.culprits, first.victims) == ("4", 6, (3,), (2,))
    assert any(line.startswith("rank 3:") for line in first.lines)
    victim = next(s for s in reading.stops if s.group.key == "1")
    assert victim.culprits == () and victim.waiting_elsewhere == (2,)
    assert "rank 2: waits in group 4 #6" in " ".join(victim.lines)


def test_the_json_keeps_the_old_keys_and_adds_the_new(tmp_path):
    result = _read("rank-without-dump", tmp_path).to_json()
    first = result["first_mismatch"]
    assert {"pg", "seq", "kind", "missing_ranks", "missing_rank_list", "collectives"} <= set(first)
    assert first["missing_rank_list"] == [3] and first["without_dump"] == [3]
    assert first["culprits"] == [3] and first["victims"] == [0, 1, 2]
    assert result["ranks_without_dump"] == "3" and result["world_size"] == 4
    assert result["dump_count"] == 3 and result["groups"][0]["members"] == "0-3"
    assert {"signature", "op", "ranks", "rank_list", "frame", "state"} <= set(
        first["collectives"][0]
    )


def test_groups_issued_in_different_orders_are_one_stop(tmp_path):
    reading = _read("different-order-majority", tmp_path)
    (stop,) = [s for s in reading.stops if s.kind == "different_order"]
    assert stop.culprits == (3,) and set(stop.victims) == {0, 1, 2}
    assert not [s for s in reading.stops if s.kind == "missing_ranks"]


def test_everyone_waiting_alike_is_no_mismatch_but_is_reported(tmp_path):
    ranks = [Rank(r, [Op("all_reduce", 1, state="started")]) for r in range(4)]
    paths = torch_format.write(tmp_path, ranks, world=4)
    reading = read_dumps([parse_flight_recorder(str(p), p.read_bytes()) for p in paths], 4)
    assert reading.first is None
    assert [s.kind for s in reading.stops] == ["all_waiting"]
    assert reading.to_json()["first_mismatch"] is None


def test_the_typed_record_reads_back_everything_the_reading_writes(tmp_path):
    for name in ("sequence-tie-across-groups", "rank-without-dump", "different-order-majority"):
        stored = _read(name, tmp_path / name).to_json()
        typed = FlightRecorderSummary.from_json(stored)
        assert typed.to_json() == stored, name
    assert typed.first_mismatch.culprit_ranks == "3"
    # A diagnosis stored before these fields existed still reads.
    old = {"ranks_with_dumps": "0-3", "dump_count": 4, "first_mismatch": {"pg": "0", "seq": 6}}
    assert FlightRecorderSummary.from_json(old).first_mismatch.culprits == ()
