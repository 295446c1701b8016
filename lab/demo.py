"""The demo for `make run`: a small lab with a hung job, or a clear reason why not.

    from lab import demo
    result = demo.start_demo()          # DemoResult(ok, nodes_json, message)
    if result.ok: import result.nodes_json into the console (manage.py cluster_import ...)
    else: show result.message on the start page

`python -m lab.demo` does the same from a shell and prints the node JSON path (exit 0) or
the reason (exit 2); `python -m lab.demo --stop` stops it.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab import cluster

DEMO_SCENARIO = "rank-exit"


@dataclass
class DemoResult:
    ok: bool
    nodes_json: str | None
    message: str


def default_demo_dir() -> Path:
    return cluster.REPO / ".lab" / "demo"


def start_demo(
    state_dir: Path | None = None, scenario: str = DEMO_SCENARIO, wait_hung: bool = False
) -> DemoResult:
    """Bring up (or reuse) a 2 x 2 lab running `scenario`. Never raises for a machine that
    cannot run the lab: the message then says what the demo needs."""
    state_dir = (state_dir or default_demo_dir()).resolve()
    missing = cluster.preflight(light=False)
    if missing:
        return DemoResult(False, None, "The demo lab needs: " + "; ".join(missing))
    nodes_json = state_dir / "nodes.json"
    current = cluster.status(state_dir)
    if (
        current["running"]
        and current.get("scenario") == scenario
        and all(n["alive"] and n["sshd"] for n in current["nodes"])
        and nodes_json.exists()
    ):
        return DemoResult(True, str(nodes_json), f"demo lab already running ({scenario})")
    try:
        info = cluster.up(
            cluster.LabOptions(nodes=2, ranks_per_node=2, scenario=scenario, state_dir=state_dir)
        )
    except (cluster.LabError, OSError) as exc:
        return DemoResult(False, None, f"The demo lab could not start: {exc}")
    if wait_hung and info["expected"]["hangs"]:
        _wait_for_hang(state_dir, info)
    return DemoResult(
        True,
        str(nodes_json),
        f"demo lab up in {info['ready_seconds']} s: {scenario}, {info['expected']['summary']}",
    )


def _wait_for_hang(state_dir: Path, info: dict, timeout: float = 90) -> bool:
    """Until the watchdog of rank 0 has dumped its flight recorder (the job is stuck)."""
    dump = state_dir / "nodes" / info["nodes"][0]["name"] / "log" / "fr" / "trace_rank_0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if dump.exists():
            return True
        time.sleep(0.5)
    return False


def stop_demo(state_dir: Path | None = None) -> list[str]:
    return cluster.down((state_dir or default_demo_dir()).resolve())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--stop" in args:
        problems = stop_demo()
        print("\n".join(problems) or "demo lab stopped")
        return 1 if problems else 0
    result = start_demo(wait_hung="--wait" in args)
    if not result.ok:
        print(result.message, file=sys.stderr)
        return 2
    print(result.message, file=sys.stderr)
    print(result.nodes_json)
    json.loads(Path(result.nodes_json).read_text())  # fail loudly if it is not valid
    return 0


if __name__ == "__main__":
    sys.exit(main())
