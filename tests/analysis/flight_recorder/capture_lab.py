"""Capture real gloo flight-recorder dumps from the lab, for the side-by-side suite.

For each scenario: `python -m lab up` (torch mode, 2 nodes x 2 ranks) in its own state dir on its
own loopback addresses, wait until every rank that lives has written its dump (the lab's
watchdog writes `torch._C._distributed_c10d._dump_fr_trace()` after 10 s without a step; a rank
that died leaves none, like a real one), copy the dumps byte for byte into
`lab_dumps/<scenario>/` with the lab's own expectation (`expected.json`), then `lab down`.

    .venv/bin/python -m tests.analysis.flight_recorder.capture_lab [SCENARIO ...]

Needs what the lab needs (root, sshd, torch). Nothing here runs in the test suite: the tests
read the captured files.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
OUT = HERE / "lab_dumps"
SCENARIOS = ("rank-exit", "collective-mismatch", "dataloader-stall", "env-drift", "tp-rank-exit")
# One address block and master port per scenario, away from the other labs on this machine.
BASE = "127.117.{index}.1"
MASTER_PORT = 29617
WAIT_S = 120


def _lab(*args: str, state: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "lab", "--state-dir", str(state), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def _dumps(state: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(state.glob("nodes/*/log/fr/trace_rank_*"))}


def capture(scenario: str, index: int) -> None:
    state = Path(tempfile.mkdtemp(prefix=f"fr-lab-{scenario}-"))
    up = _lab(
        "up",
        "--scenario",
        scenario,
        "--base-address",
        BASE.format(index=index + 1),
        "--master-port",
        str(MASTER_PORT + index),
        state=state,
    )
    try:
        if up.returncode != 0:
            raise SystemExit(f"lab up {scenario} failed: {up.stderr[-2000:]}")
        info = json.loads((state / "nodes.json").read_text())
        expected = info["expected"]
        alive = expected["world_size"] - len(expected.get("missing_ranks") or [])
        deadline = time.monotonic() + WAIT_S
        while len(_dumps(state)) < alive and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(2)  # a dump being written is renamed into place; let the last ones land
        found = _dumps(state)
        if len(found) < alive:
            raise SystemExit(f"{scenario}: {len(found)} dumps of {alive} after {WAIT_S} s")
        target = OUT / scenario
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name, path in found.items():
            shutil.copyfile(path, target / name)
        meta = {"scenario": scenario, "expected": expected, "torch_mode": True}
        (target / "expected.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        print(f"{scenario}: {sorted(found)}")
    finally:
        _lab("down", state=state)
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    chosen = sys.argv[1:] or list(SCENARIOS)
    for scenario in chosen:
        capture(scenario, SCENARIOS.index(scenario) if scenario in SCENARIOS else 9)


if __name__ == "__main__":
    main()
