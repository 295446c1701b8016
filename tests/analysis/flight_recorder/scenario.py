"""What a flight-recorder scenario is: the dumps (written, or captured), and the answer the
evidence supports (`Expect`), compared in the classes of `KIND_CLASS`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.analysis.flight_recorder.torch_format import Rank

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parent / "samples"
LAB_DUMPS = HERE / "lab_dumps"

# hangdesk's stop kinds -> the classes the answers are compared in (PyTorch's MatchState maps
# to the same classes in pytorch_side.py).
KIND_CLASS = {
    "different_collective": "collective",
    "different_sizes": "sizes",
    "invalid_sizes": "sizes",
    "different_dtypes": "dtypes",
    "invalid_dtypes": "dtypes",
    "not_completed": "state",
    "not_started": "state",
    "missing_ranks": "missing",
    "unmatched_p2p": "missing",
    "different_order": "order",
}


@dataclass(frozen=True)
class Expect:
    kind: str | None  # None: every collective met; else a class of KIND_CLASS
    at: tuple[tuple[str, int], ...] = ()  # (group name, sequence id): where it may be reported
    culprits: tuple[int, ...] | None = None  # None: no rank can be singled out

    def text(self) -> str:
        if self.kind is None:
            return "all met"
        where = " or ".join(f"{pg} #{seq}" for pg, seq in self.at)
        who = "no single rank" if self.culprits is None else _ranks(self.culprits)
        return f"{self.kind} at {where}; {who}"


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # "pytorch" | "issue" | "lab"
    story: str
    expect: Expect
    ranks: tuple[Rank, ...] = ()
    world: int = 2
    captured: Path | None = None  # real dumps: every trace_rank_N file in this directory
    as_json: bool = False  # use the captured .json dumps instead of the pickles
    note: str = ""  # what changed from the source


def _ranks(ranks) -> str:
    ranks = list(ranks)
    return "rank " + str(ranks[0]) if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))


MATCHED = Expect(None)
