"""The watch's cost per node per period, on a light lab of N nodes (real sshd, stand-in ranks
that log a step line every 0.5 s).

Each period does what watch.visits.read_nodes does: one SSH connection per node (side by
side, up to 16), the node read of watch/probe.sh (presence check everywhere, log tails on the
step node only once it is known), then the pure judgement (watch.progress.judge). Measured per
period: SSH sessions, bytes read per node (step node and presence-only nodes apart), the
worker's CPU (process time of this process: paramiko's handshakes, framing, parsing, judging)
and wall time. The database writes of a period (one UPDATE, one INSERT, one DELETE) are not
in these figures.

    .venv/bin/python bench/bench_watch.py --nodes 2 8 --periods 10

With --farm, the nodes are the node farm's (lab/farm.py: one process serving N virtual SSH
nodes on loopback, answering the watch's read with captured output), so a period can be
measured at 1,000 nodes; the farm's own CPU is reported apart from the worker's:

    .venv/bin/python bench/bench_watch.py --farm --nodes 250 1000 --periods 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clusters.sshspec import NodeTarget  # noqa: E402
from collectors.visits import run_script  # noqa: E402
from hangdesk.plan import CollectionPlan  # noqa: E402
from lab import cluster, farm  # noqa: E402
from watch import progress, reading  # noqa: E402

TAIL_BYTES = 8192  # settings.WATCH_TAIL_BYTES


def one_period(info: dict, step_nodes: set[str], before: progress.Before, threads: int = 16):
    spec = info["cluster"]
    limits = CollectionPlan(
        process_pattern=spec["process_pattern"], connect_timeout_s=5, total_timeout_s=15,
        command_timeout_s=5, tail_bytes=TAIL_BYTES, artifact_cap_bytes=TAIL_BYTES,
        max_total_bytes=4 << 20,
    )  # fmt: skip

    def read(node: dict) -> reading.NodeReading:
        with_logs = not step_nodes or node["name"] in step_nodes
        plan = reading.ReadPlan(
            process_pattern=spec["process_pattern"],
            log_globs=tuple(spec["log_globs"]) if with_logs else (),
            tail_bytes=TAIL_BYTES,
        )
        target = NodeTarget(
            name=node["name"], address=node["address"], port=node["port"],
            username=node["username"], key_path=node["key_path"], host_key=node["host_key"],
        )  # fmt: skip
        run = run_script(target, limits, lambda nonce: reading.render_script(plan, nonce))
        return reading.reading_from_frames(
            node["name"], run.frames, error=run.failure.text if run.failure else "",
            bytes_read=run.bytes_read, seconds=run.seconds,
        )  # fmt: skip

    cpu, wall = time.process_time(), time.monotonic()
    with ThreadPoolExecutor(max_workers=min(threads, len(info["nodes"]))) as pool:
        readings = list(pool.map(read, info["nodes"]))
    judgement = progress.judge(readings, before, progress.Settings(), datetime.now(UTC))
    return readings, judgement, time.process_time() - cpu, time.monotonic() - wall


def bench(nodes: int, periods: int, period_s: float) -> dict:
    state_dir = Path(tempfile.mkdtemp(prefix=f"bench-watch-{nodes}-"))
    opts = cluster.LabOptions(
        nodes=nodes, ranks_per_node=2, scenario="healthy", light=True, state_dir=state_dir,
        step_time=0.5, master_port=29000 + nodes,
    )  # fmt: skip
    info = cluster.up(opts)
    try:
        time.sleep(3)
        before, step_nodes = progress.Before(), set()
        rows = []
        for _ in range(periods + 1):  # the first period finds the step node; not counted
            readings, judgement, cpu, wall = one_period(info, step_nodes, before)
            assert all(r.ok for r in readings), [r.error for r in readings]
            rows.append((readings, judgement, cpu, wall, set(step_nodes)))
            step_nodes = set(judgement.step_nodes[:1])
            before = progress.Before(
                judgement.last_step, judgement.last_step_at, judgement.step_times, judgement.pids
            )
            time.sleep(period_s)
        rows = rows[1:]
        step_bytes = [r.bytes_read for rs, *_, sn in rows for r in rs if r.node in sn]
        other_bytes = [r.bytes_read for rs, *_, sn in rows for r in rs if r.node not in sn]
        return {
            "nodes": nodes,
            "periods": periods,
            "ssh_sessions_per_period": nodes,
            "state": rows[-1][1].state,
            "bytes_step_node": int(statistics.median(step_bytes)),
            "bytes_other_node": int(statistics.median(other_bytes)) if other_bytes else None,
            "cpu_ms_per_node": round(1000 * statistics.median(r[2] for r in rows) / nodes, 1),
            "cpu_ms_per_period": round(1000 * statistics.median(r[2] for r in rows), 1),
            "wall_s_per_period": round(statistics.median(r[3] for r in rows), 2),
            "node_read_s_median": round(
                statistics.median(r.seconds for rs, *_ in rows for r in rs), 3
            ),
        }
    finally:
        cluster.down(state_dir)


def bench_farm(nodes: int, periods: int, period_s: float, threads: int = 16) -> dict:
    state_dir = Path(tempfile.mkdtemp(prefix=f"bench-watch-farm-{nodes}-"))
    running = farm.launch(
        farm.FarmOptions(nodes=nodes, ranks_per_node=8, fault="none", state_dir=state_dir)
    )
    try:
        info = running.info
        before, step_nodes = progress.Before(), set()
        rows = []
        for _ in range(periods + 1):  # the first period finds the step node; not counted
            farm_cpu = running.cpu_s()
            readings, judgement, cpu, wall = one_period(info, step_nodes, before, threads)
            failed = [r.error for r in readings if not r.ok]
            assert not failed, failed[:3]
            rows.append((readings, cpu, wall, running.cpu_s() - farm_cpu, set(step_nodes)))
            step_nodes = set(judgement.step_nodes[:1])
            before = progress.Before(
                judgement.last_step, judgement.last_step_at, judgement.step_times, judgement.pids
            )
            time.sleep(period_s)
        rows = rows[1:]
        other = [r.bytes_read for rs, *_, sn in rows for r in rs if r.node not in sn]
        return {
            "nodes": nodes,
            "farm": True,
            "threads": threads,
            "periods": periods,
            "state": judgement.state,
            "bytes_other_node": int(statistics.median(other)) if other else None,
            "worker_cpu_s_per_period": round(statistics.median(r[1] for r in rows), 2),
            "worker_cpu_ms_per_node": round(
                1000 * statistics.median(r[1] for r in rows) / nodes, 1
            ),
            "wall_s_per_period": round(statistics.median(r[2] for r in rows), 2),
            "farm_cpu_s_per_period": round(statistics.median(r[3] for r in rows), 2),
            "node_read_s_median": round(
                statistics.median(r.seconds for rs, *_ in rows for r in rs), 3
            ),
        }
    finally:
        running.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--periods", type=int, default=10)
    parser.add_argument("--period", type=float, default=2.0)
    parser.add_argument("--farm", action="store_true", help="the node farm's nodes, not a lab")
    parser.add_argument("--threads", type=int, default=16, help="reads side by side (--farm)")
    args = parser.parse_args()
    for nodes in args.nodes:
        if args.farm:
            print(bench_farm(nodes, args.periods, args.period, args.threads), flush=True)
        else:
            print(bench(nodes, args.periods, args.period), flush=True)


if __name__ == "__main__":
    main()
