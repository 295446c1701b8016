"""Click to verdict on a fleet: the node farm (lab/farm.py) through real Celery workers.

For each farm size N (8 ranks a node) and each count W of ssh worker processes: a farm of N
virtual SSH nodes with a planted fault, its cluster imported, then `snapshot_start()` (the
click) -> W prefork processes of the ssh worker visit the nodes (HANGDESK_SSH_FANOUT each
at once) over Redis, store their evidence in PostgreSQL, the analysis worker (2 processes,
as deployed) stores the verdict (at 1,000 nodes and more the ahead worker's reader, which read
the parses as they came in: collectors/read_ahead.py), the early worker (2) the first one.
Measured: click to first verdict (a provisional one, if the console shows one before the last
node: `Snapshot.provisional`, judged too) and to the final one; whether the verdict is the
planted fault; the ssh worker's CPU per node (its processes' user + system time, as the kernel
counts it); the analysis, early and ahead workers' CPU (the early's and the ahead's apart in
the JSON); the tail
after the last node (`tail`: each analysis task's receipt, start and end from the workers'
logs; in the table, `tail` is the verdict's finished_at and `stored` its commit, both from
the last node's finished_at); the farm's own CPU apart; database rows and bytes per node;
the incident page's server time and HTML size; the load average beside each (the machine is shared).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hangdesk_bench \\
        .venv/bin/python bench/bench_fleet.py --redis-url redis://127.0.0.1:6379/13 \\
        --nodes 250 1000 4000 --workers 1 2 4

    --faults rank-gone group-mismatch node-down node-slow   (each fault its own farm)
    --redis-url   the broker for this run's workers (default: $REDIS_URL, else db 14). Give
                  it a Redis database of its own: the bench purges its ssh queue, and any
                  other worker on that database would take its tasks (and run them with its
                  own code); the bench refuses to start when another worker answers there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.consolekit import console_settings  # noqa: E402 (the repo is on the path now)

console_settings(bench_database=True)

TICKS = os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[250, 1000, 4000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--faults", nargs="+", default=["rank-gone"])
    parser.add_argument("--slow-s", type=float, default=30.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, help="append each run's figures here")
    parser.add_argument("--redis-url", default=os.environ["REDIS_URL"])
    args = parser.parse_args()
    os.environ["REDIS_URL"] = args.redis_url  # before django.setup(); the workers inherit it

    from bench.consolekit import console_database

    console_database()
    _alone_on_the_broker(args.redis_url)
    rows = []
    for nodes in args.nodes:
        for fault in args.faults:
            rows.extend(_farm_runs(nodes, fault, args))
    print()
    print(
        "| nodes | ssh processes | fault | last node in | first verdict | first right "
        "| final verdict | right | tail | stored "
        "| failed nodes "
        "| worker CPU / node | analysis CPU | farm CPU / node | rows / node | KB / node "
        "| page | HTML | load before → after |"
    )
    print("|" + "---|" * 19)
    for r in rows:
        print(
            f"| {r['nodes']} | {r['workers']} | {r['fault']} "
            f"| {_seconds(r['collected_s'], r['timeout_s'])} "
            f"| {_seconds(r['first_s'], r['timeout_s'])} "
            f"| {_first(r)} "
            f"| {_seconds(r['final_s'], r['timeout_s'])} "
            f"| {'yes' if r['right'] else 'no: ' + r['verdict']} "
            f"| {_after(r['tail']['verdict_s'])} | {_after(r['tail']['stored_s'])} "
            f"| {r['failed']} | {r['worker_ms_per_node']:.1f} ms | {r['analysis_cpu_s']:.1f} s "
            f"| {r['farm_ms_per_node']:.1f} ms | {r['rows_per_node']:.1f} "
            f"| {r['kb_per_node']:.1f} | {r['page_s']:.2f} s | {r['html_kib']:.0f} KiB "
            f"| {r['load'][0]:.1f} → {r['load'][1]:.1f} |"
        )


def _alone_on_the_broker(url: str) -> None:
    """No other worker listens on this Redis database (it would take the bench's tasks)."""
    from console.celery import app

    answers = app.control.ping(timeout=1.0) or []
    if answers:
        names = ", ".join(name for answer in answers for name in answer)
        raise SystemExit(f"{url}: other workers answer there ({names}): give --redis-url a "
                         "Redis database of the bench's own")  # fmt: skip
    print(f"broker {url}, database {os.environ['DATABASE_URL']}", flush=True)


def _farm_runs(nodes: int, fault: str, args) -> list[dict]:
    from lab import farm
    from tests.helpers import free_port

    state = Path(tempfile.mkdtemp(prefix=f"hangdesk-bench-farm-{nodes}-"))
    opts = farm.FarmOptions(
        nodes=nodes, fault=fault, slow_s=args.slow_s, port=free_port(), state_dir=state,
        lifetime_s=4 * 3600,
    )  # fmt: skip
    running = farm.launch(opts, ready_timeout=600)
    try:
        cluster = _import(running.info, f"farm-{nodes}-{fault}")
        rows = []
        for workers in args.workers:
            row = _run(running, cluster, workers, args.timeout)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                with args.json.open("a") as out:
                    out.write(json.dumps(row) + "\n")
        return rows
    finally:
        print(running.stop().strip().splitlines()[-1], flush=True)


def _import(info: dict, name: str):
    """The farm's cluster through the import, its first node too (validated as any node is);
    the rest inserted at once: 4,000 imports one by one take minutes, and are not measured."""
    from clusters.importing import cluster_import
    from clusters.models import Node

    started = time.perf_counter()
    first, *rest = info["nodes"]
    data = {**info, "cluster": {**info["cluster"], "name": name}, "nodes": [first]}
    cluster = cluster_import(data).cluster
    fields = ("name", "address", "port", "username", "key_path", "host_key")
    Node.objects.bulk_create(
        (Node(cluster=cluster, **{k: n[k] for k in fields}) for n in rest), batch_size=1000
    )
    _purge("ssh")  # the import asked for a check of its node: not what is measured
    print(f"{name}: imported in {time.perf_counter() - started:.1f} s", flush=True)
    return cluster


def _purge(queue: str) -> None:
    from console.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge(queue)


def _run(running, cluster, workers: int, timeout: float) -> dict:
    from collectors.models import NodeCollection, NodeStatus, Snapshot, SnapshotStatus
    from collectors.starts import snapshot_start
    from incidents.services import incident_open

    ssh = _start_worker("ssh", workers)
    # As docker-compose deploys them: the final verdicts on two processes, the first verdict
    # and the GPU read from the click on two others (the final never queues behind them).
    analysis = _start_worker("analysis", 2)
    early = _start_worker("early", 2)
    # A large snapshot's parses read as they arrive, its final verdict made there
    # (collectors/read_ahead.py): one process, as deployed.
    ahead = _start_worker("ahead", 1)
    try:
        incident = incident_open(
            opened_by=None, title=f"fleet {cluster.name}", cluster=cluster, severity="SEV2"
        )
        load_before = os.getloadavg()[0]
        ssh_cpu, analysis_cpu, farm_cpu = _tree_cpu(ssh), _tree_cpu(analysis), running.cpu_s()
        early_cpu, ahead_cpu = _tree_cpu(early), _tree_cpu(ahead)
        started = time.perf_counter()
        snapshot, _ = snapshot_start(incident=incident, source="bench")
        first = final = collected = first_shown = None
        while final is None:
            if time.perf_counter() - started > timeout:
                break  # reported as no verdict within the timeout
            status, diagnosis, shown = (
                Snapshot.objects.filter(pk=snapshot.pk)
                .values_list("status", "diagnosis", "provisional")
                .get()
            )
            if (
                collected is None
                and not snapshot.collections.filter(
                    status__in=(NodeStatus.PENDING, NodeStatus.RUNNING)
                ).exists()
            ):
                collected = time.perf_counter() - started
            if first is None and (diagnosis or _provisional(shown)):
                first = time.perf_counter() - started
                first_shown = _provisional(shown)
            if status in (SnapshotStatus.DONE, SnapshotStatus.FAILED):
                final = time.perf_counter() - started
            time.sleep(0.1)
        ssh_cpu = _tree_cpu(ssh) - ssh_cpu
        analysis_cpu = _tree_cpu(analysis) - analysis_cpu
        early_cpu = _tree_cpu(early) - early_cpu
        ahead_cpu = _tree_cpu(ahead) - ahead_cpu
        farm_cpu = running.cpu_s() - farm_cpu
        load_after = os.getloadavg()[0]
    finally:
        _stop(ssh)
        _stop(analysis)
        _stop(early)
        _stop(ahead)
    snapshot.refresh_from_db()
    nodes = len(running.info["nodes"])
    failed = NodeCollection.objects.filter(snapshot=snapshot, status=NodeStatus.FAILED).count()
    right, verdict = _judge(snapshot, running.info["expected"])
    first_right, first_verdict = _judge_provisional(first_shown, running.info["expected"])
    rows, stored = _storage(snapshot)
    page_s, html = _page(incident)
    tail = _tail(snapshot, [_log_path(name) for name in ("ssh", "analysis", "early", "ahead")])
    return {
        "nodes": nodes, "workers": workers, "fault": running.info["expected"]["fault"],
        "collected_s": _round(collected), "first_s": _round(first or final),
        "final_s": _round(final), "right": right, "timeout_s": timeout,
        "first_provisional": first_shown is not None, "first_right": first_right,
        "first_verdict": first_verdict,
        "verdict": verdict, "failed": failed, "status": snapshot.status,
        "worker_ms_per_node": round(1000 * ssh_cpu / nodes, 2),
        "analysis_cpu_s": round(analysis_cpu + early_cpu + ahead_cpu, 2),
        "early_cpu_s": round(early_cpu, 2), "ahead_cpu_s": round(ahead_cpu, 2),
        "farm_ms_per_node": round(1000 * farm_cpu / nodes, 2),
        "rows_per_node": round(rows / nodes, 2), "kb_per_node": round(stored / nodes / 1000, 2),
        "page_s": round(page_s, 3), "html_kib": round(html / 1024, 1),
        "load": [round(load_before, 1), round(load_after, 1)],
        "tail": tail,
    }  # fmt: skip


def _first(row: dict) -> str:
    if not row["first_provisional"]:
        return "(the final one)"
    return "yes" if row["first_right"] else "no: " + row["first_verdict"]


def _after(seconds: float | None) -> str:
    return "?" if seconds is None else f"+{seconds:.2f} s"


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 2)


def _seconds(seconds: float | None, timeout: float) -> str:
    return f">{timeout:g} s" if seconds is None else f"{seconds:.1f} s"


def _provisional(shown: dict | None) -> dict | None:
    """The verdict shown before the last node is in (`Snapshot.provisional`, stored by
    collectors/provisional.py), once it is made: a claimed one ({"state": "due"}) is not."""
    if isinstance(shown, dict) and isinstance(shown.get("verdict"), dict):
        return shown
    return None


def _judge_provisional(shown: dict | None, expected: dict) -> tuple[bool | None, str]:
    """Is the first verdict the planted fault? None when the first verdict was the final one.
    A node still out is unobserved in it: with node-slow, the slow node's ranks must be."""
    if shown is None:
        return None, "final"
    verdict = shown["verdict"]
    out = f"{shown['nodes_in']}/{shown['nodes_total']} in"
    said = (
        f"{verdict.get('classification')} suspects {list(verdict.get('suspect_ranks') or [])[:8]}"
    )
    if expected["fault"] == "node-slow":
        unobserved = set(verdict.get("unobserved_ranks") or ())
        return set(expected["provisional_unobserved"]) <= unobserved, f"{out}: {said}"
    if verdict.get("classification") != expected["classification"]:
        return False, f"{out}: {said}"
    if expected["fault"] == "node-down":
        unobserved = set(verdict.get("unobserved_ranks") or ())
        return set(expected["unobserved_ranks"]) <= unobserved, f"{out}: {said}"
    return list(verdict.get("suspect_ranks") or []) == expected["suspect_ranks"], f"{out}: {said}"


def _judge(snapshot, expected: dict) -> tuple[bool, str]:
    diagnosis = snapshot.read_diagnosis()
    if diagnosis is None:
        return False, f"no diagnosis ({snapshot.error})"
    said = f"{diagnosis.classification} suspects {list(diagnosis.suspect_ranks)[:8]}"
    if diagnosis.classification != expected["classification"]:
        return False, said
    if expected["fault"] == "node-down":
        unobserved = set(diagnosis.unobserved_ranks)
        return set(expected["unobserved_ranks"]) <= unobserved, said
    return list(diagnosis.suspect_ranks) == expected["suspect_ranks"], said


def _storage(snapshot) -> tuple[int, int]:
    """Rows (node visits and artifacts) and bytes (artifacts as stored) of the snapshot."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(octet_length(a.compressed) + length(a.name)), 0) "
            "FROM collectors_artifact a JOIN collectors_nodecollection c "
            "ON a.collection_id = c.id WHERE c.snapshot_id = %s",
            [snapshot.pk],
        )
        artifacts, stored = cursor.fetchone()
    return artifacts + snapshot.collections.count(), int(stored)


def _page(incident) -> tuple[float, int]:
    from django.contrib.auth.models import User
    from django.test import Client

    user = User.objects.filter(username="bench").first() or User.objects.create_superuser(
        "bench", "", "bench-password-1"
    )
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    url = incident.get_absolute_url()
    client.get(url)
    times, size = [], 0
    for _ in range(3):
        start = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
        size = len(response.content)
    return statistics.median(times), size


_LOG_LINE = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:,]+): INFO/(?P<process>[\w-]+)\] Task collectors\.tasks\."
    r"(?P<task>\w+)\[(?P<id>[\w-]+)\] (?P<what>received|succeeded in (?P<run_s>[\d.e-]+)s)"
)


# The workers' own lines on the hand-off: the group that stored the last node (fanout.py), and
# the reader's final verdict (read_ahead.py).
_AT = r"^\[(?P<at>[\d-]+ [\d:,]+): \w+/[\w-]+\] "
_STORED_DUE = re.compile(
    _AT + r"stored (?P<nodes>\d+) nodes of snapshot (?P<snapshot>\d+) (?P<after_s>[\d.]+) s "
    r"after the last of their visits ended(?:, in a store of (?P<store_s>[\d.]+) s)? "
    r"\(its last node: analysis due\)"
)
_READER_FINAL = re.compile(
    _AT + r"final verdict of snapshot (?P<snapshot>\d+) made in (?P<run_s>[\d.]+) s"
)
# Each ssh process's end of the fleet: when it took no more of the snapshot's nodes, how many
# it was still visiting, and its stores after (fanout.py logs those).
_NO_MORE = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:,]+): \w+/(?P<process>[\w-]+)\] taking no more nodes of snapshot "
    r"(?P<snapshot>\d+) \([^)]*\): (?P<visiting>\d+) being visited"
)
_STORED = re.compile(
    r"^\[(?P<at>[\d-]+ [\d:,]+): \w+/(?P<process>[\w-]+)\] stored (?P<nodes>\d+) nodes of "
    r"snapshot (?P<snapshot>\d+) "
)


def _log_at(text: str, last) -> float:
    at = datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").astimezone()
    return round((at - last).total_seconds(), 3)


def _hand_off(snapshot, logs: list[Path], last) -> dict:
    """The last group's store (how many nodes, when its commit was logged, and when the last of
    their visits ended: the logged wait before it), the reader's final verdict (its start,
    from its logged run) and each ssh process's end (when it took no more, how many nodes it
    was visiting then, its last store after), in seconds from the last node's row's
    finished_at; None when not logged. The visits' end is that group's: a node of another
    group could have ended later and committed first (then the tail from the last visit is
    longer than said here)."""
    store = reader = None
    ends: dict[str, dict] = {}  # by ssh process: its last nodes (see _NO_MORE)
    for log in logs:
        for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
            if (match := _NO_MORE.match(line)) and int(match["snapshot"]) == snapshot.pk:
                at = _log_at(match["at"], last)
                ends[match["process"]] = {"no_more": at, "visiting": int(match["visiting"])}
            stored = _STORED.match(line)
            if stored and int(stored["snapshot"]) == snapshot.pk and stored["process"] in ends:
                end = ends[stored["process"]]
                end["stored"] = end.get("stored", 0) + int(stored["nodes"])
                end["last_store"] = _log_at(stored["at"], last)
            if (match := _STORED_DUE.match(line)) and int(match["snapshot"]) == snapshot.pk:
                at = _log_at(match["at"], last)
                store = {"nodes": int(match["nodes"]), "committed": at,
                         "visits_ended": round(at - float(match["after_s"]), 3),
                         "store_s": match["store_s"] and float(match["store_s"])}  # fmt: skip
            elif (match := _READER_FINAL.match(line)) and int(match["snapshot"]) == snapshot.pk:
                at = _log_at(match["at"], last)
                reader = {"start": round(at - float(match["run_s"]), 3), "end": at}
    return {"last_store": store, "reader_final": reader, "ssh_ends": ends}


def _tail(snapshot, logs: list[Path]) -> dict:
    """After the last node: when the batch that stored it ended, when the final analysis was
    received, started and done, and what the analysis workers ran meanwhile (each task's
    start is its end less its run time, as Celery logs them), all in seconds from the last
    node's row's finished_at (stamped in its store's transaction, before its commit)."""
    from collectors.models import NodeCollection

    last = max(NodeCollection.objects.filter(snapshot=snapshot).values_list(
        "finished_at", flat=True))  # fmt: skip
    tasks: dict[str, dict] = {}
    for log in logs:
        for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
            match = _LOG_LINE.match(line)
            if not match:
                continue
            at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").astimezone()
            seen = tasks.setdefault(match["id"], {"task": match["task"], "log": log.stem})
            if match["run_s"] is None:
                seen["received"] = round((at - last).total_seconds(), 2)
            else:
                seen["end"] = round((at - last).total_seconds(), 2)
                seen["start"] = round(seen["end"] - float(match["run_s"]), 2)
                seen["process"] = match["process"]
    ran = sorted(tasks.values(), key=lambda t: t.get("start", t.get("received", 0)))
    # The final verdict's task: the analysis worker's, or the reader's (collectors/read_ahead.py)
    # that made it: the longest of those ending after the last node (the others only looked).
    final = sorted(
        (t for t in ran if t["task"] in ("analyse_snapshot", "read_parses_ahead")
         and t.get("end", -1) >= 0),
        key=lambda t: t["end"] - max(t["start"], 0),
    )  # fmt: skip
    # The batch that stored the last node: its end is when it queued the analysis.
    batches = [t for t in ran if t["task"] == "collect_nodes" and "end" in t]
    hand_off = _hand_off(snapshot, logs, last)
    # Stored: committed, so visible (finished_at is stamped before the verdict's UPDATE). The
    # reader logs its verdict once committed; the analysis worker's task ends then.
    if hand_off["reader_final"]:
        stored = hand_off["reader_final"]["end"]
    else:
        stored = final[-1].get("end") if final else None
    return {
        "last_batch": max(batches, key=lambda t: t["end"]) if batches else None,
        "last_node_at": last.isoformat(),
        "verdict_s": round((snapshot.finished_at - last).total_seconds(), 2)
        if snapshot.finished_at
        else None,
        "stored_s": stored,
        "final": final[-1] if final else None,
        "tasks": [t for t in ran if t["task"] != "collect_nodes"],
        **hand_off,
    }


def _log_path(name: str) -> Path:
    return Path(os.environ["HANGDESK_VAR_DIR"]) / f"worker-{name}.log"


def _start_worker(name: str, concurrency: int) -> subprocess.Popen:
    from console.celery import worker_command

    log_path = _log_path(name)
    log_path.unlink(missing_ok=True)
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            worker_command(name, hostname=f"bench-{name}-{os.getpid()}@%h",
                           concurrency=concurrency),
            cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while b" ready." not in log_path.read_bytes():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the {name} worker did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.2)
    return worker


def _stop(worker: subprocess.Popen) -> None:
    import signal

    worker.terminate()
    try:
        worker.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()


def _tree_cpu(worker: subprocess.Popen) -> float:
    """User + system seconds of the worker's main process and its pool processes."""
    total, pids = 0.0, [worker.pid, *_children(worker.pid)]
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(child) for task in tasks for child in (task / "children").read_text().split()]
    except OSError:
        return []


if __name__ == "__main__":
    main()
