"""Stack groups and compact rank sets."""

import random

import pytest

from analysis import compact_ranks
from analysis.parsers.pyspy import main_thread, parse_pyspy
from analysis.stacks import relevant_frame
from tests.analysis.sample_evidence import (
    diagnosis_json,
    drop_rank_process,
    load_snapshot,
    read_public,
)


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([0, 1, 2, 5], "0-2, 5"),
        ([], ""),
        ([7], "7"),
        ([*range(7), *range(8, 40)], "0-6, 8-39"),
        ([3, 1, 2, 2], "1-3"),
    ],
)
def test_it_writes_rank_sets_compactly(ranks, text):
    assert compact_ranks(ranks) == text


def test_compact_ranks_finds_every_run_of_any_length():
    """Runs are galloped to and bisected: every length and gap, as one rank at a time."""
    rng = random.Random(22)
    for _ in range(2000):
        ranks = sorted(
            {rng.randrange(-4, rng.choice([8, 40, 300])) for _ in range(rng.randrange(40))}
        )
        if rng.random() < 0.3:
            ranks = sorted({*ranks, *range(rng.randrange(300), rng.randrange(300, 2000))})
        runs: list[list[int]] = []
        for rank in ranks:
            if runs and rank == runs[-1][-1] + 1:
                runs[-1].append(rank)
            else:
                runs.append([rank])
        expected = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
        assert compact_ranks(reversed(ranks)) == expected


def test_it_groups_ranks_by_stack_largest_group_first():
    groups = diagnosis_json(load_snapshot("outside"))["stack_groups"]
    assert [(g["frame"], g["ranks"]) for g in groups] == [
        ("all_reduce", "0-2"),
        ("SlowLoader.__next__", "3"),
    ]
    assert groups[0]["location"].startswith("torch/distributed/distributed_c10d.py:")
    assert groups[0]["stack"][0].startswith("all_reduce")


def test_it_names_init_process_group_for_a_rendezvous_hang():
    groups = diagnosis_json(load_snapshot("init"))["stack_groups"]
    frames = {g["frame"] for g in groups}
    assert "init_process_group" in frames
    assert "(absent)" in frames


def test_it_names_the_innermost_collective_through_wrappers():
    threads, _ = parse_pyspy(read_public("pyspy_threads_public.txt"))
    frame = relevant_frame(main_thread(threads).frames)
    assert frame.name == "all_gather_into_tensor"
    assert frame.filename == "torch/distributed/distributed_c10d.py"


def test_it_lists_absent_ranks_as_their_own_group():
    snapshot = drop_rank_process(load_snapshot("outside"), 1)
    groups = diagnosis_json(snapshot)["stack_groups"]
    absent = [g for g in groups if g["kind"] == "missing"]
    assert absent and absent[0]["ranks"] == "1"


def test_ranks_a_partial_bundle_cannot_hold_are_unobserved_not_absent():
    # A world of 6 claimed, one node of 4 ranks (LOCAL_WORLD_SIZE=4) in the bundle: ranks 4-5
    # run on a node nobody looked at.
    snapshot = load_snapshot("outside")
    snapshot.expected_world_size = 6
    result = diagnosis_json(snapshot)
    assert result["missing_ranks"] == [] and result["unobserved_ranks"] == [4, 5]
    assert [g["ranks"] for g in result["stack_groups"] if g["kind"] == "unobserved"] == ["4-5"]
