"""The probe is plain sh: OpenSSH alone runs it (the benchmark baseline) with the same result."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from analysis.evidence import GATHERED
from hangdesk.frames import parse_probe_output

BASELINE = Path(__file__).parents[2] / "bench" / "bench_collect_baseline.sh"


def test_the_baseline_script_collects_the_same_evidence_over_openssh(sshd, ranks, tmp_path):
    plan = ranks.plan()
    target = sshd.target()
    nodes = {
        "cluster": {
            "name": "bench",
            "process_pattern": plan.process_pattern,
            "log_globs": plan.log_globs,
            "flight_recorder_globs": plan.flight_recorder_globs,
            "pyspy_command": plan.pyspy_command,
        },
        "nodes": [
            {
                "name": f"node-{index}",
                "address": target.address,
                "port": target.port,
                "username": target.username,
                "key_path": target.key_path,
                "host_key": target.host_key,
            }
            for index in range(3)
        ],
    }
    (tmp_path / "nodes.json").write_text(json.dumps(nodes))
    out = tmp_path / "out"
    # One node at a time: these three "nodes" are one host with the same pids, and py-spy
    # dumps a process by ptrace, which takes one tracer at a time (a second dump at the same
    # moment fails: "Failed to suspend process: EPERM"). Real nodes each have their own ranks.
    result = subprocess.run(
        [str(BASELINE), str(tmp_path / "nodes.json"), "1", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "baseline: 3 nodes, 3 complete" in result.stdout
    for index in range(3):
        evidence = parse_probe_output(f"node-{index}", (out / f"node-{index}.out").read_bytes())
        assert evidence.status == GATHERED
        assert set(ranks.pids) <= set(evidence.pyspy), evidence.pyspy_errors
        assert set(ranks.pids) <= set(evidence.environ)
