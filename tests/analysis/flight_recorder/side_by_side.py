"""hangdesk and PyTorch's flight-recorder analyzer on every scenario, side by side.

    .venv/bin/python -m tests.analysis.flight_recorder.side_by_side   # prints the table

The table (and its summary line) is what docs/accuracy.md shows between its markers;
tests/analysis/flight_recorder/test_side_by_side.py checks that it still is.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from analysis.alignment import read_dumps
from analysis.parsers.flight_recorder import parse_flight_recorder
from tests.analysis.flight_recorder import pytorch_side, torch_format
from tests.analysis.flight_recorder.pytorch_side import Answer
from tests.analysis.flight_recorder.scenarios import KIND_CLASS, Expect, Scenario, all_scenarios

BEGIN = "<!-- side-by-side: begin (tests/analysis/flight_recorder/side_by_side.py) -->"
END = "<!-- side-by-side: end -->"


def stage(scenario: Scenario, directory: Path) -> Path:
    """The scenario's dumps as files named the way torch names them."""
    directory.mkdir(parents=True, exist_ok=True)
    if scenario.captured is None:
        torch_format.write(directory, list(scenario.ranks), scenario.world)
        return directory
    suffix = ".json" if scenario.as_json else ""
    for path in sorted(scenario.captured.glob("trace_rank_*")):
        if path.suffix == suffix or (not suffix and not path.suffix):
            shutil.copyfile(path, directory / path.name.removesuffix(suffix))
    return directory


def hangdesk(directory: Path, world: int) -> Answer:
    dumps = [parse_flight_recorder(str(p), p.read_bytes()) for p in sorted(directory.iterdir())]
    reading = read_dumps(dumps, world)
    first = reading.first
    if first is None:
        return Answer(None)
    kind = KIND_CLASS.get(first.kind, first.kind)
    return Answer(kind, first.pg, first.seq, tuple(first.culprits))


def right(expect: Expect, answer: Answer) -> bool:
    if answer.crashed or answer.kind != expect.kind:
        return False
    if expect.kind is None:
        return True
    if (answer.pg, answer.seq) not in expect.at:
        return False
    return expect.culprits is None or tuple(sorted(answer.culprits)) == expect.culprits


@dataclass(frozen=True)
class Row:
    scenario: Scenario
    pytorch: Answer
    hangdesk: Answer

    @property
    def pytorch_right(self) -> bool:
        return right(self.scenario.expect, self.pytorch)

    @property
    def hangdesk_right(self) -> bool:
        return right(self.scenario.expect, self.hangdesk)


def run(scenarios: list[Scenario] | None = None) -> list[Row]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="fr-side-by-side-") as tmp:
        for index, scenario in enumerate(scenarios or all_scenarios()):
            directory = stage(scenario, Path(tmp) / f"{index:03d}")
            rows.append(
                Row(scenario, pytorch_side.analyse(directory), hangdesk(directory, scenario.world))
            )
    return rows


def summary(rows: list[Row]) -> str:
    crashed = sum(1 for r in rows if r.pytorch.crashed)
    by_source = {}
    for source in ("pytorch", "issue", "lab"):
        mine = [r for r in rows if r.scenario.source == source]
        by_source[source] = (
            sum(r.pytorch_right for r in mine),
            sum(r.hangdesk_right for r in mine),
            len(mine),
        )
    parts = "; ".join(
        f"{source}: PyTorch {p} of {n}, hangdesk {h} of {n}"
        for source, (p, h, n) in by_source.items()
    )
    return (
        f"PyTorch's analyzer right on {sum(r.pytorch_right for r in rows)} of {len(rows)} "
        f"(it crashed on {crashed}), hangdesk on {sum(r.hangdesk_right for r in rows)} of "
        f"{len(rows)} ({parts})."
    )


def markdown(rows: list[Row]) -> str:
    lines = [
        BEGIN,
        summary(rows),
        "",
        "| scenario | from | what the ranks did | the answer | PyTorch 2.13's analyzer "
        "| hangdesk |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        s = row.scenario
        story = s.story + (f" ({s.note})" if s.note else "")
        mark = {True: "right", False: "**wrong**"}
        lines.append(
            f"| `{s.name}` | {s.source} | {story} | {s.expect.text()} | "
            f"{row.pytorch.text()}: {mark[row.pytorch_right]} | "
            f"{row.hangdesk.text()}: {mark[row.hangdesk_right]} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    sys.stdout.write(markdown(run()) + "\n")


if __name__ == "__main__":
    main()
