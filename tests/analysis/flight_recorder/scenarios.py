"""The flight-recorder scenarios hangdesk and PyTorch's analyzer are read side by side on.

Three sources:
- `pytorch`: every scenario of PyTorch's own analyzer tests
  (test/distributed/flight_recorder/test_fr_analysis.py in pytorch/pytorch: the pairs of
  FlightRecorderEventTest.test_match_one_event, each collective of test_all_events, the backends
  of FlightRecorderOpBackendTest, the six cases of FlightRecorderE2ETest.testBuildDB), each turned
  into one dump per rank. Two things change on the way, both toward what torch writes: dtypes
  are lists of torch's names (['Float'], not the string "float32"), and sequence ids are numbers
  that grow (the test's helper leaves every entry at collective_seq_id "0"; torch counts).
- `issue`: the cases issue 17 lists beyond them (dtypes, state, coalesced groups, ranks without
  a dump, send/recv, sequence ties across groups, rooted and uneven collectives, orders).
- `lab`: real gloo dumps written by torch 2.13 itself, from the lab and from
  tests/analysis/samples.

Each scenario states the answer the evidence supports (`Expect`), written from what the ranks
did, not from either tool's output: the class of the first stop, where it is, and its culprits
(None where the evidence cannot single a rank out: equal sides, every rank alike).
"""

from __future__ import annotations

import json

from tests.analysis.flight_recorder.issue_cases import issue_scenarios
from tests.analysis.flight_recorder.pytorch_cases import pytorch_scenarios
from tests.analysis.flight_recorder.scenario import (
    KIND_CLASS,
    LAB_DUMPS,
    SAMPLES,
    Expect,
    Scenario,
)

__all__ = [
    "KIND_CLASS",
    "LAB_DUMPS",
    "SAMPLES",
    "Expect",
    "Scenario",
    "all_scenarios",
    "issue_scenarios",
    "lab_scenarios",
    "pytorch_scenarios",
]


def _sample(name: str, story: str, expect: Expect, as_json: bool = False) -> Scenario:
    suffix = "-json" if as_json else ""
    return Scenario(
        f"gloo-{name}{suffix}",
        "lab",
        story,
        expect,
        world=4,
        captured=SAMPLES / name / "fr",
        as_json=as_json,
    )


# The lab's stuck group and sequence id, as its expectation names them (docs/lab.md).
def _lab(name: str) -> Scenario:
    meta = json.loads((LAB_DUMPS / name / "expected.json").read_text())["expected"]
    kind = {"rank-exit": "missing", "collective-mismatch": "collective",
            "dataloader-stall": "missing", "env-drift": None,
            "tp-rank-exit": "missing"}[name]  # fmt: skip
    culprits = tuple(meta.get("suspect_ranks") or ()) or None
    stuck = meta.get("stuck_group") or {}
    # The lab's step N is seq N of a tp/dp group, and seq N + 1 of the default group (its
    # first collective is the start-up barrier).
    seq = stuck["seq"] if stuck else meta["fault_step"] + 1
    at = tuple((group, seq) for group in _lab_groups(name)) if kind else ()
    return Scenario(
        f"lab-{name}",
        "lab",
        meta["summary"],
        Expect(kind, at, culprits if kind else None),
        world=meta["world_size"],
        captured=LAB_DUMPS / name,
    )


def _lab_groups(name: str) -> tuple[str, ...]:
    """Where the dead rank 3's absence shows: the default group; in the tp scenarios its tp
    group 4 and its dp group 2 (docs/lab.md: dp [0, 2] [1, 3] = groups 1, 2; tp [0, 1] [2, 3] =
    groups 3, 4)."""
    return ("4", "2") if name.startswith("tp-") else ("0",)


def lab_scenarios() -> list[Scenario]:
    samples = [
        _sample(
            "outside",
            "captured: at step 6 rank 3 blocks in its data loader; ranks 0-2 wait in all_reduce",
            Expect("missing", (("0", 6),), (3,)),
        ),
        _sample(
            "outside",
            "the same dumps as torch's JSON (_dump_fr_trace_json)",
            Expect("missing", (("0", 6),), (3,)),
            as_json=True,
        ),
        _sample(
            "mismatch",
            "captured: at step 6 rank 0 runs an extra broadcast; ranks 1-3 all_reduce",
            Expect("collective", (("0", 6),), (0,)),
        ),
        _sample(
            "tp-rank-stall",
            "captured dp x tp: rank 3 deadlocks before its tp all_reduce #6 (group 4); rank 2 "
            "waits there, ranks 0-1 in their dp groups",
            Expect("missing", (("4", 6), ("2", 6)), (3,)),
        ),
        _sample(
            "tp-mismatch",
            "captured dp x tp: at #6 of group 4 rank 3 runs all_gather where rank 2 runs "
            "all_reduce (and so does the other tp group)",
            Expect("collective", (("4", 6),), (3,)),
        ),
    ]
    captured = [_lab(p.name) for p in sorted(LAB_DUMPS.glob("*")) if (p / "expected.json").exists()]
    return samples + captured


def all_scenarios() -> list[Scenario]:
    return pytorch_scenarios() + issue_scenarios() + lab_scenarios()
