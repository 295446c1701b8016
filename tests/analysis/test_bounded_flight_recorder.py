"""Flight-recorder dumps are untrusted: a few hundred bytes must not become gigabytes.

Each bomb runs in a child under RLIMIT_AS 1 GiB / RLIMIT_CPU 30 s (tests.hostile.run_limited),
so a bomb that is not defused fails here (MemoryError, SIGXCPU) instead of taking the machine.
"""

import json
import pickle
from pathlib import Path

import pytest

from analysis.parsers.flight_recorder import (
    MAX_TEXT_CHARS,
    UnsafePickleError,
    parse_flight_recorder,
    rank_from_dump_path,
    safe_loads,
)
from tests import hostile

SAMPLES = Path(__file__).parent / "samples"

_PARSE_EACH = """
import json, sys
from analysis.parsers.flight_recorder import parse_flight_recorder
from tests import hostile
out = {}
for name, blob in eval(sys.argv[1]).items():
    dump = parse_flight_recorder("trace_rank_0", blob)
    texts = [e.input_sizes + e.output_sizes + e.op + e.state + e.pg + e.frame for e in dump.entries]
    out[name] = {"entries": len(dump.entries), "longest": max(map(len, texts), default=0),
                 "problems": dump.problems}
print(json.dumps(out))
"""


def _parse_limited(builders: str) -> dict:
    done = hostile.run_limited(_PARSE_EACH, builders)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_shared_references_never_expand_in_any_field():
    # The review's finding: 346 bytes -> 1 GB and 20 s in repr() (2**30 leaves); here in every
    # field that is later turned into text.
    fields = ["input_sizes", "output_sizes", "profiling_name", "state", "process_group"]
    builders = "{" + ",".join(f"{f!r}: hostile.shared_reference_pickle(30, {f!r})" for f in fields)
    builders += ', "frames": hostile._entry_pickle(hostile._unicode("frames") + b"](}("'
    builders += ' + hostile._unicode("filename") + hostile.shared_reference_chain(30) + b"ue")}'
    results = _parse_limited(builders)
    assert set(results) == {*fields, "frames"}
    for field, result in results.items():
        assert result["entries"] == 1 and result["problems"] == [], field
        assert result["longest"] <= 6 * MAX_TEXT_CHARS, field
    assert len(hostile.shared_reference_pickle(30)) < 400


def test_a_memo_index_far_past_the_dump_is_refused_before_allocating():
    # 7 bytes asking for memo slot 10**8: the C unpickler allocated and zeroed 1.5 GB for it.
    results = _parse_limited('{"memo": hostile.memo_index_pickle(10**8)}')
    assert results["memo"]["entries"] == 0
    assert "refusing memo index 100000000" in results["memo"]["problems"][0]


def test_a_flood_of_one_byte_containers_is_refused_before_building():
    # 4 M lists from 4 MB: ~300 MB of objects; the estimate refuses it unbuilt.
    results = _parse_limited('{"flood": hostile.container_flood_pickle(4_000_000)}')
    assert "would build about" in results["flood"]["problems"][0]


def test_sets_are_refused_by_the_scan():
    with pytest.raises(UnsafePickleError, match="0x8f"):
        safe_loads(b"\x80\x04\x8f\x94.")


def test_an_int_too_big_for_str_is_rendered_by_its_size():
    (entry,) = parse_flight_recorder("trace_rank_0", hostile.huge_int_pickle()).entries
    assert entry.op.startswith("<int of ") and entry.op.endswith(" bits>")


@pytest.mark.parametrize(
    "entry",
    [
        {"collective_seq_id": 3, "is_p2p": True, "p2p_seq_id": "3"},
        {"collective_seq_id": 10**40},
        {"collective_seq_id": True},
        {"collective_seq_id": 3, "time_created_ns": "soon"},
    ],
    ids=["p2p-seq-str", "seq-too-big", "seq-bool", "time-str"],
)
def test_wrong_types_in_entries_are_dropped_or_ignored(entry):
    dump = parse_flight_recorder("trace_rank_0", pickle.dumps({"entries": [entry], "rank": 2**70}))
    assert dump.rank == 0  # from the file name: the dict's rank is no rank
    assert all(isinstance(e.seq, int) and e.seq < 2**63 for e in dump.entries)
    assert len(dump.created_ns) == len(dump.entries)
    assert all(t is None or type(t) is int for t in dump.created_ns)


@pytest.mark.parametrize(
    ("path", "rank"),
    [
        ("fr/trace_rank_3", 3),
        ("fr/trace_rank_12.json", 12),
        ("fr/trace_rank_²", None),
        ("fr/trace_rank_٣", None),
        ("fr/trace_" + "7" * 5000, None),
    ],
)
def test_the_rank_in_a_dump_name_is_ascii_digits_only(path, rank):
    assert rank_from_dump_path(path) == rank


def _plain_values(protocol: int) -> list:
    # Protocols 0-2 spell bytes as a call to _codecs.encode, which the unpickler refuses.
    raw = b"\x00" * 300 if protocol >= 3 else "no bytes before protocol 3"
    return [
        {"entries": [{"collective_seq_id": i, "input_sizes": [[i, 2]], "name": "x" * i}]}
        for i in (0, 1, 300)
    ] + [{"memo": [["shared"] * 3] * 400, "float": 1.5, "bytes": raw, "t": (1, 2)}]


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_every_protocol_of_plain_data_passes_the_scan(protocol):
    for value in _plain_values(protocol):
        assert safe_loads(pickle.dumps(value, protocol=protocol)) == value


@pytest.mark.parametrize("protocol", [2, 3, 4])
def test_payloads_of_every_short_length_pass_the_scan_and_one_cut_short_is_refused(protocol):
    # The scan takes payloads of under 256 bytes inside its regex, one alternative per length
    # (protocol 2 spells bytes as a call, refused: strings only there).
    raw = [b"b" * size for size in range(300)] if protocol >= 3 else []
    value = {"entries": ["é" * size for size in range(300)] + raw}
    assert safe_loads(pickle.dumps(value, protocol=protocol)) == value
    for opcode in (b"\x8c\xc8", b"X\xc8\x00\x00\x00"):  # 200 bytes announced, 199 there
        with pytest.raises(UnsafePickleError, match="at byte 2 announces 200 bytes; 199 are left"):
            safe_loads(b"\x80" + bytes([protocol]) + opcode + b"x" * 199)


def test_every_captured_pickle_passes_the_scan_unchanged():
    dumps = sorted(p for p in SAMPLES.glob("*/fr/trace_rank_*") if p.suffix != ".json")
    assert len(dumps) >= 20
    for path in dumps:
        data = path.read_bytes()
        assert safe_loads(data) == pickle.loads(data)  # noqa: S301 - our own captured samples


@pytest.mark.parametrize("opcode", [b"\x96", b"\x8e", b"\x8d"], ids=["bytearray8", "bytes8", "str"])
def test_a_length_past_the_end_of_the_dump_is_refused_before_allocating(opcode):
    # The unpickler allocated what the length said before reading: 1 GiB here, and 2**63 gave
    # a MemoryError plus CPython's "deallocated bytearray object has exported buffers".
    for size in (1 << 30, 8363318616188351661):
        blob = b"\x80\x04" + opcode + size.to_bytes(8, "little") + b"abc."
        (problem,) = parse_flight_recorder("trace_rank_0", blob).problems
        assert f"announces {size} bytes; 4 are left" in problem


def test_a_frame_longer_than_the_dump_is_refused():
    blob = b"\x80\x04\x95" + (1 << 40).to_bytes(8, "little") + b"N."
    (problem,) = parse_flight_recorder("trace_rank_0", blob).problems
    assert f"announces {1 << 40} bytes" in problem
