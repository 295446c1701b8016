"""hangdesk's snapshot against plain OpenSSH doing the same collection, on an N-node lab.

For each N: a light-mode lab of N nodes (2 stand-in ranks each, real sshd, real py-spy), then
  - hangdesk: snapshot_start() -> a real Celery worker (prefork, --concurrency C) runs the
    collect_nodes tasks (batches of nodes) over the Redis broker, storing evidence in
    PostgreSQL; timed
    from the call until every node is finished (collection), and until the verdict is stored;
  - baseline: bench/bench_collect_baseline.sh, the same probe over `ssh ... sh -s` with
    `xargs -P C` (same commands, same concurrency), raw output to files.
Runs alternate, repeated; medians are printed with their ratio and the time per (N / C).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hangdesk_bench \
    REDIS_URL=redis://127.0.0.1:6379/14 \
        .venv/bin/python bench/bench_snapshot.py --nodes 8 16 32 64 --concurrency 8 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.consolekit import console_settings  # noqa: E402 (the repo is on the path now)

console_settings(bench_database=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from bench.consolekit import console_database

    console_database()

    from console.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("ssh")
    worker = _start_worker(args.concurrency)
    rows = []
    try:
        for nodes in args.nodes:
            rows.append(_measure(nodes, args.concurrency, args.repeat))
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    print()
    print(
        "| nodes | concurrency | hangdesk collect | + verdict | OpenSSH xargs -P | ratio | "
        "hangdesk s per N/C |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['nodes']} | {args.concurrency} | {r['hangdesk']:.2f} s | {r['verdict']:.2f} s "
            f"| {r['baseline']:.2f} s | {r['hangdesk'] / r['baseline']:.2f} | "
            f"{r['hangdesk'] / (r['nodes'] / args.concurrency):.2f} |"
        )


def _start_worker(concurrency: int) -> subprocess.Popen:
    log = open(Path(os.environ["HANGDESK_VAR_DIR"]) / "worker.log", "wb")  # noqa: SIM115
    # One worker for every queue, so the C processes are the whole of hangdesk's side; the
    # analysis (one per snapshot, after the collection is timed) runs there too.
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", "-Q", "ssh,analysis,default",
         "--pool", "prefork", "--concurrency", str(concurrency), "--loglevel", "WARNING"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    time.sleep(8)  # let the pool start before the first timing
    return worker


def _measure(nodes: int, concurrency: int, repeat: int) -> dict:
    from lab import cluster as lab_cluster
    from tests.helpers import free_port

    state = Path(tempfile.mkdtemp(prefix=f"hangdesk-bench-lab-{nodes}-"))
    info = lab_cluster.up(
        lab_cluster.LabOptions(
            nodes=nodes, ranks_per_node=2, scenario="healthy", light=True, state_dir=state,
            master_port=free_port(),
        )
    )  # fmt: skip
    try:
        hangdesk, verdict, baseline = [], [], []
        for round_ in range(repeat):
            order = [_hangdesk, _baseline] if round_ % 2 == 0 else [_baseline, _hangdesk]
            for run in order:
                result = run(info, state, concurrency)
                if run is _hangdesk:
                    hangdesk.append(result[0])
                    verdict.append(result[1])
                else:
                    baseline.append(result)
        row = {
            "nodes": nodes,
            "hangdesk": statistics.median(hangdesk),
            "verdict": statistics.median(verdict),
            "baseline": statistics.median(baseline),
        }
        print(f"N={nodes}: hangdesk {hangdesk}, verdict {verdict}, baseline {baseline}", flush=True)
        return row
    finally:
        lab_cluster.down(state)


def _hangdesk(info: dict, state: Path, concurrency: int) -> tuple[float, float]:
    from clusters.importing import cluster_import
    from collectors.models import NodeCollection, Snapshot
    from collectors.starts import snapshot_start
    from incidents.services import incident_open

    cluster = cluster_import({**info, "cluster": {**info["cluster"], "name": "bench"}}).cluster
    incident = incident_open(opened_by=None, title="bench", cluster=cluster, severity="SEV4")
    started = time.perf_counter()
    snapshot, _ = snapshot_start(incident=incident, source="bench")
    collected = None
    while True:
        if (
            collected is None
            and not NodeCollection.objects.filter(
                snapshot=snapshot, status__in=["pending", "running"]
            ).exists()
        ):
            collected = time.perf_counter() - started
        status = Snapshot.objects.filter(pk=snapshot.pk).values_list("status", flat=True).get()
        if status in ("done", "failed"):
            failed = NodeCollection.objects.filter(snapshot=snapshot, status="failed").count()
            if failed:
                print(f"  warning: {failed} nodes failed", flush=True)
            return collected or time.perf_counter() - started, time.perf_counter() - started
        time.sleep(0.05)


def _baseline(info: dict, state: Path, concurrency: int) -> float:
    nodes_json = state / "nodes.json"
    out = Path(tempfile.mkdtemp(prefix="hangdesk-baseline-"))
    started = time.perf_counter()
    result = subprocess.run(
        ["bash", str(REPO / "bench" / "bench_collect_baseline.sh"), str(nodes_json),
         str(concurrency), str(out)],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    last = result.stdout.strip().splitlines()[-1]
    if "complete" in last and f"{len(info['nodes'])} complete" not in last:
        print(f"  warning: baseline {last}", flush=True)
    return elapsed


if __name__ == "__main__":
    main()
