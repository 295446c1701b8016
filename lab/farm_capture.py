"""Capture what the node farm replays: the real probe output of a real lab's nodes.

`python -m lab farm-capture --scenario rank-exit` brings up a torch lab (2 nodes x 8 ranks,
the tests' fast timings), waits until the fault has happened and every live rank has dumped
its flight recorder, then runs, on every node, over plain OpenSSH with the lab's pinned host
keys, the two scripts the console sends: the snapshot probe (hangdesk/probe.sh, rendered as
the console renders it for the lab's cluster) and the watch probe (watch/probe.sh, presence
plus log tails). The raw output of each is written gzip'd to lab/farm_captures/<scenario>/,
with `capture.json` saying how, when and what the lab expected. The farm (lab/farm.py) serves
these bytes, renumbered per node; nothing in them is written by hand.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from hangdesk import frames
from hangdesk.frames import render_probe
from hangdesk.plan import CollectionPlan
from lab import cluster

CAPTURES = Path(__file__).with_name("farm_captures")
WATCH_SCRIPT = cluster.REPO / "watch" / "probe.sh"
NONCE = "farmcapture"
FAST = {"fault_step": 5, "step_time": 0.4, "watchdog_timeout": 5.0}


def _ssh(info: dict, node: dict, script: bytes, budget: int = 50) -> bytes:
    command = [
        "ssh", "-i", node["key_path"], "-p", str(node["port"]),
        "-o", f"UserKnownHostsFile={info['known_hosts']}", "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
        f"{node['username']}@{node['address']}", f"timeout -k 2 {budget} sh -s",
    ]  # fmt: skip
    done = subprocess.run(command, input=script, capture_output=True, timeout=budget + 20)
    if done.returncode != 0 or b"HD1 end 0" not in done.stdout:
        raise cluster.LabError(f"probe of {node['name']} failed: {done.stderr[-500:]!r}")
    return done.stdout


def _watch_script(info: dict) -> bytes:
    settings = {
        "HD_PATTERN": info["cluster"]["process_pattern"],
        "HD_LOG_GLOBS": "\n".join(info["cluster"]["log_globs"]),
        "HD_TAIL_BYTES": "8192",
        "HD_NONCE": NONCE,
    }
    return frames.render_script(WATCH_SCRIPT, settings)


def _wait_for_dumps(state_dir: Path, info: dict, timeout: float = 120) -> None:
    """Every rank that is still alive has written its flight-recorder dump."""
    world = info["cluster"]["world_size"]
    gone = set(info["expected"].get("missing_ranks") or [])
    wanted = {f"trace_rank_{r}" for r in range(world) if r not in gone}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {p.name for p in (state_dir / "nodes").glob("*/log/fr/trace_rank_*")}
        if wanted <= found:
            time.sleep(2)  # the last dump is written whole
            return
        time.sleep(1)
    raise cluster.LabError(f"flight-recorder dumps missing after {timeout:g} s")


def capture(scenario: str, *, nodes: int = 2, ranks_per_node: int = 8) -> Path:
    out = CAPTURES / scenario
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="farm-capture-") as tmp:
        state_dir = Path(tmp)
        info = cluster.up(
            cluster.LabOptions(
                nodes=nodes, ranks_per_node=ranks_per_node, scenario=scenario,
                state_dir=state_dir, **FAST,
            )
        )  # fmt: skip
        try:
            _wait_for_dumps(state_dir, info)
            c = info["cluster"]
            plan = CollectionPlan(
                process_pattern=c["process_pattern"],
                log_globs=c["log_globs"],
                flight_recorder_globs=c["flight_recorder_globs"],
                pyspy_command=c["pyspy_command"],
            )
            probe = render_probe(plan, nonce=NONCE)
            captured_at = datetime.now(UTC)
            names = []
            for node in info["nodes"]:
                raw = _ssh(info, node, probe)
                (out / f"{node['name']}.probe.gz").write_bytes(gzip.compress(raw, 9, mtime=0))
                watch = _ssh(info, node, _watch_script(info), budget=20)
                (out / f"{node['name']}.watch.gz").write_bytes(gzip.compress(watch, 9, mtime=0))
                names.append(node["name"])
        finally:
            cluster.down(state_dir)
    meta = {
        "scenario": scenario,
        "captured_at": captured_at.isoformat(),
        "how": "python -m lab farm-capture: a torch lab, the console's probe over OpenSSH",
        "nonce": NONCE,
        "nodes": names,
        "ranks_per_node": ranks_per_node,
        "world_size": info["cluster"]["world_size"],
        "node_addresses": [n["address"] for n in info["nodes"]],
        "cluster": {k: v for k, v in info["cluster"].items() if k != "description"},
        "expected": info["expected"],
    }
    (out / "capture.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out
