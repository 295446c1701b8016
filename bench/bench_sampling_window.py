"""What the probe's sampling window costs a node: a visit with and without it.

Brings up a lab (real torch ranks, real sshd and py-spy), then visits every node the way the
console does (`ssh_visit`), alternating sample_seconds=0 and the default window, and
prints the median visit per node; then the CPU one `py-spy record` of the window takes on a
node (`/usr/bin/time` around it, over SSH), per process.

    .venv/bin/python bench/bench_sampling_window.py [--nodes 2] [--ranks-per-node 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clusters.sshspec import NodeTarget  # noqa: E402
from collectors.visits import ssh_visit  # noqa: E402
from hangdesk.plan import SAMPLE_S, CollectionPlan  # noqa: E402
from lab import cluster  # noqa: E402
from tests.helpers import free_port  # noqa: E402
from tests.labkit import Lab  # noqa: E402


def _visit_all(lab: Lab, sample_seconds: int) -> list[float]:
    info = lab.info["cluster"]
    plan = CollectionPlan(
        process_pattern=info["process_pattern"],
        log_globs=info["log_globs"],
        flight_recorder_globs=info["flight_recorder_globs"],
        pyspy_command=info["pyspy_command"],
        sample_seconds=sample_seconds,
    )
    targets = [
        NodeTarget(
            name=n["name"], address=n["address"], port=n["port"], username=n["username"],
            key_path=n["key_path"], host_key=n["host_key"],
        )
        for n in lab.nodes
    ]  # fmt: skip

    def timed(target) -> float:
        started = time.monotonic()
        visit = ssh_visit(target, plan)
        assert visit.failure is None, visit.failure
        windows = len(visit.evidence.pyspy_samples)
        assert (windows > 0) == (sample_seconds > 0), windows
        return time.monotonic() - started

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        return list(pool.map(timed, targets))


def _record_cpu(lab: Lab, seconds: int) -> list[float]:
    """CPU seconds (user + system) of one `py-spy record` window, per rank process."""
    out = []
    spy = lab.info["cluster"]["pyspy_command"]
    for node in range(len(lab.nodes)):
        for pid in lab.rank_pids(node).values():
            command = (
                f"/usr/bin/time -f '%U %S' {spy} record --pid {pid} --duration {seconds} "
                "--rate 50 --format raw --output /dev/null --idle --threads --nonblocking"
            )
            code, _, err = lab.run(node, command, timeout=seconds + 30)
            assert code == 0, err
            user, system = err.strip().splitlines()[-1].split()
            out.append(float(user) + float(system))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--ranks-per-node", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    missing = cluster.preflight(light=False)
    if missing:
        raise SystemExit("the lab cannot run here: " + "; ".join(missing))
    state = Path(tempfile.mkdtemp(prefix="hd-bench-window-"))
    opts = cluster.LabOptions(
        scenario="healthy", state_dir=state, nodes=args.nodes,
        ranks_per_node=args.ranks_per_node, master_port=free_port(), step_time=0.4,
    )  # fmt: skip
    lab = Lab(cluster.up(opts), state, master_port=opts.master_port)
    window = SAMPLE_S
    try:
        time.sleep(5)  # past the warm-up
        without, with_window = [], []
        for _ in range(args.repeat):
            without += _visit_all(lab, 0)
            with_window += _visit_all(lab, window)
        cpu = _record_cpu(lab, window)
    finally:
        left = lab.down()
    load = os.getloadavg()[0]
    print(f"{args.nodes} nodes x {args.ranks_per_node} ranks, {args.repeat} visits of each node")
    print(f"visit per node without the window: median {statistics.median(without):.2f} s")
    print(f"visit per node with a {window} s window: median {statistics.median(with_window):.2f} s")
    print(
        f"py-spy record CPU per process: median {statistics.median(cpu):.3f} s, "
        f"max {max(cpu):.3f} s"
    )
    print(f"load average (1 min) at the end: {load:.1f}; lab left behind: {left or 'nothing'}")


if __name__ == "__main__":
    main()
