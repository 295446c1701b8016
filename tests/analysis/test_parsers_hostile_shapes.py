"""Evidence that decodes but has a shape no collector writes: deep nesting, wrong types, lone
surrogates. Each is a problem to report, never an exception out of the parser."""

import pickle

import pytest

from analysis.parsers.flight_recorder import parse_flight_recorder
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.stacks import stack_signature

DEPTH = 200_000


def _pickle_with_deep_input_sizes() -> bytes:
    # EMPTY_LIST DEPTH times, then APPEND DEPTH-1 times: a list nested DEPTH deep, built by
    # opcodes alone (pickle.dumps itself would hit the recursion limit).
    nested = b"]" * DEPTH + b"a" * (DEPTH - 1)
    entry = b"}(X\x11\x00\x00\x00collective_seq_idK\x01X\x0b\x00\x00\x00input_sizes" + nested + b"u"
    return b"\x80\x02}(X\x07\x00\x00\x00entries](" + entry + b"eu."


@pytest.mark.parametrize(
    "blob",
    [
        pickle.dumps({"entries": 5}),
        pickle.dumps({"entries": [], "pg_config": ["not", "a", "dict"]}),
        b'{"entries": [], "pg_status": 3}',
    ],
    ids=["entries-int", "pg-config-list", "json-pg-status-int"],
)
def test_a_flight_recorder_dump_of_a_hostile_shape_is_a_problem_not_a_crash(blob):
    dump = parse_flight_recorder("trace_rank_0", blob)
    assert dump.entries == [] and dump.pg_ranks == {}
    assert len(dump.problems) == 1 and "not understood" in dump.problems[0]


def test_deeply_nested_input_sizes_are_rendered_within_the_text_cap():
    # Rendered depth- and length-bounded (flight_recorder._sizes), never with repr().
    (entry,) = parse_flight_recorder("trace_rank_0", _pickle_with_deep_input_sizes()).entries
    assert entry.input_sizes.startswith("[[[[") and len(entry.input_sizes) <= 512


def test_a_deeply_nested_pg_config_ranks_string_is_ignored():
    blob = pickle.dumps({"entries": [], "pg_config": {"0": {"ranks": "[" * 100_000}}})
    dump = parse_flight_recorder("trace_rank_0", blob)
    assert dump.pg_ranks == {} and dump.problems == []


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        '[{"frames": [{"name": ' + "[" * 5_000 + "]" * 5_000 + ', "filename": "a"}]}]',
    ],
    ids=["deep-document", "deep-frame-name"],
)
def test_deeply_nested_py_spy_json_is_a_problem_not_a_crash(text):
    threads, problems = parse_pyspy(text)
    assert threads == []
    assert problems


def test_a_lone_surrogate_in_py_spy_json_still_gets_a_stack_signature():
    text = '[{"thread_name": "MainThread", "frames": [{"name": "\\ud800", "filename": "/a/b.py"}]}]'
    threads, problems = parse_pyspy(text)
    frames = main_thread(threads).frames
    assert problems == [] and frames[0].name == "\ud800"
    signature = stack_signature(frames)
    assert len(signature) == 12 and signature != stack_signature([])


def test_dumps_sharing_a_pg_config_share_rank_lists_no_caller_can_change():
    blob = pickle.dumps({"entries": [], "pg_config": {"0": {"ranks": "[0, 1, 2, 3]"}}})
    first = parse_flight_recorder("trace_rank_0", blob)
    with pytest.raises(AttributeError):
        first.pg_ranks["0"].append(99)  # type: ignore[attr-defined]
    second = parse_flight_recorder("trace_rank_1", blob)
    assert second.pg_ranks == {"0": (0, 1, 2, 3)}
    assert second.pg_ranks["0"] is first.pg_ranks["0"]  # parsed once for every dump


def test_rank_lists_alike_in_length_and_ends_are_each_read_as_themselves():
    # The parser's cache finds a list by its length and first and last 48 characters, then
    # compares it whole: lists that differ only in the middle must not be taken for each other.
    head, tail = list(range(100)), list(range(1000, 1100))
    lists = [[*head, 500 + k, 600 - k, *tail] for k in range(6)]  # same lengths, same ends
    texts = [str(ranks) for ranks in lists]
    assert len({len(t) for t in texts}) == 1 and len(set(texts)) == 6
    for _ in range(2):  # the second time every one is cached (or evicted by its alikes)
        for rank, (ranks, text) in enumerate(zip(lists, texts, strict=True)):
            blob = pickle.dumps({"entries": [], "pg_config": {"0": {"ranks": text}}})
            parsed = parse_flight_recorder(f"trace_rank_{rank}", blob)
            assert parsed.pg_ranks == {"0": tuple(ranks)}
