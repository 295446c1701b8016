"""Flight-recorder alignment on real gloo dumps."""

import dataclasses

from analysis.alignment import align_flight_recorder, read_watchdog
from analysis.parsers.flight_recorder import parse_flight_recorder
from analysis.parsers.logs import parse_log
from analysis.snapshot_parse import parse_snapshot
from tests.analysis.sample_evidence import SAMPLES, load_snapshot


def _dumps(scenario, kind="pickle"):
    return parse_snapshot(load_snapshot(scenario, fr_kind=kind)).dumps


def test_it_finds_the_first_collective_a_rank_never_joined():
    first = align_flight_recorder(_dumps("outside"))["first_mismatch"]
    assert first["kind"] == "missing_ranks"
    assert (first["pg"], first["seq"]) == ("0", 6)
    assert first["missing_ranks"] == "3"
    assert first["collectives"][0]["op"] == "gloo:all_reduce"


def test_it_finds_a_different_op_at_the_same_sequence_id_in_json_dumps():
    first = align_flight_recorder(_dumps("mismatch", "json"))["first_mismatch"]
    assert first["kind"] == "different_collective"
    assert [(c["op"], c["ranks"]) for c in first["collectives"]] == [
        ("gloo:all_reduce", "1-3"),
        ("gloo:broadcast", "0"),
    ]


def _keep(dump, wanted) -> None:
    """Keep the entries `wanted` says, with their times (a dump keeps them in step)."""
    kept = [(e, t) for e, t in zip(dump.entries, dump.created_ns, strict=True) if wanted(e)]
    dump.entries = [e for e, _ in kept]
    dump.created_ns = [t for _, t in kept]


def test_it_finds_a_size_mismatch_of_the_same_op():
    dumps = _dumps("outside")
    # Rank 2 edited to all-reduce a different size at #3: same op, different meeting.
    edited = []
    for dump in dumps:
        if dump.rank == 2:
            dump.entries = [
                e if e.seq != 3 else dataclasses.replace(e, input_sizes="[[2048]]")
                for e in dump.entries
            ]
        edited.append(dump)
    first = align_flight_recorder(edited)["first_mismatch"]
    assert first["seq"] == 3 and first["kind"] == "different_sizes"
    assert first["collectives"][1]["ranks"] == "2"


def test_it_only_compares_what_every_ring_buffer_still_holds():
    dumps = _dumps("outside")
    for dump in dumps:
        if dump.rank == 1:
            _keep(dump, lambda e: e.seq >= 3)  # older entries overwritten
    first = align_flight_recorder(dumps)["first_mismatch"]
    assert first["seq"] == 6  # not 1: ranks 1's buffer simply forgot #1-2


def test_it_reports_nothing_unmatched_when_all_agree():
    dumps = _dumps("outside")
    for dump in dumps:
        _keep(dump, lambda e: e.seq <= 5)  # before the hang
    result = align_flight_recorder(dumps)
    assert result["first_mismatch"] is None
    assert result["last_completed_seq"] == [{"seq": 5, "ranks": "0-3"}]


def test_it_reads_the_stuck_collective_from_watchdog_lines():
    facts = parse_log("w.log", (SAMPLES / "public/watchdog.log").read_text())
    result = read_watchdog([("n", f.rank, f) for f in facts.watchdog])
    assert result["stuck_collective"]["seq"] in {808, 469508, 2398459}
    assert result["last_completed"] == {"1": 807, "118": 2398458}
    assert result["lagging_ranks"] == [1]


def test_it_ignores_a_dump_it_cannot_read():
    dump = parse_flight_recorder("trace_rank_0", b"not a pickle")
    assert align_flight_recorder([dump]) is not None
    assert align_flight_recorder([]) is None
