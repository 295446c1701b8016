"""`parse_environ_subset` (what the per-rank parse uses) agrees with `parse_environ` filtered."""

import random
import time

import pytest

from analysis.parsers.environ import COMMS_PREFIXES, parse_environ, parse_environ_subset
from tests.analysis.sample_evidence import SAMPLES

NAMES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})


def _filtered(raw):
    env, problems = parse_environ(raw)
    kept = {k: v for k, v in env.items() if k in NAMES or k.startswith(COMMS_PREFIXES)}
    return kept, problems


def _assert_same(raw):
    expected, got = _filtered(raw), parse_environ_subset(raw, NAMES, COMMS_PREFIXES)
    assert got == expected
    assert list(got[0]) == list(expected[0])  # same order too


@pytest.mark.parametrize("path", sorted(SAMPLES.glob("*/environ_*")), ids=lambda p: p.parent.name)
def test_it_keeps_the_same_variables_as_the_full_parse_on_captured_environments(path):
    raw = path.read_bytes()
    _assert_same(raw)
    kept, _ = parse_environ_subset(raw, NAMES, COMMS_PREFIXES)
    assert kept["RANK"] == parse_environ(raw)[0]["RANK"]
    assert any(name.startswith("TORCH_") for name in kept)
    assert "PATH" not in kept


@pytest.mark.parametrize(
    "raw",
    [
        None,
        b"",
        "RANK=1\nNCCL_A=x=y\n=bad\nnoeq\n\nRANK=2\nTORCH_=\r\nMASTER_ADDR\nMASTER_PORT=1\n",
        b"RANK=3\0\0=\0NCCL_X\0NCCL_Y=\xff\0WORLD_SIZE=4",
        "RANKS=1\0RANK=5\0LOCAL_RANK=2\0XNCCL_A=1\0NCCL_A=2\0NCCL_A=3",
        "=\0=\0",
        "\0\0\0",
        "x" * 5000 + "=1\0NCCL_" + "a" * 5000,
    ],
)
def test_it_counts_bad_entries_and_repeats_like_the_full_parse(raw):
    _assert_same(raw)


def test_it_agrees_with_the_full_parse_on_random_garbage():
    rnd = random.Random(9)
    pieces = ["\0", "=", "\n", "N", "NCCL_", "RANK", "A", "MASTER_PORT", "TORCH_", "\r", "é"]
    for _ in range(2000):
        _assert_same("".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 30))))


@pytest.mark.parametrize(
    "raw",
    [
        "NCCL_" * 400_000,
        "A" * 2_000_000,
        "\0" * 2_000_000,
        "NCCL_" + "=" * 2_000_000,
        "\0".join(["NCCL_X"] * 300_000),
    ],
    ids=["prefix-repeated", "one-name", "separators", "equals", "no-values"],
)
def test_it_stays_linear_on_2_mb_of_hostile_environ(raw):
    started = time.process_time()
    parse_environ_subset(raw, NAMES, COMMS_PREFIXES)
    assert time.process_time() - started < 1.0
