"""Light-mode rank: a stand-in for a torch rank when many nodes must fit (benchmarks).

No torch, no sockets, ~10 MiB per process. The ranks do not talk to each other: a shared
start time (--start-at) and step time keep them in lock-step by the clock. Each one has the
call stack of a training rank (main -> train_step -> load_batch / all_reduce), writes the
same step lines, has the same environment, and fails in the same scenarios. Its
"flight-recorder" dump is a pickle with torch's schema, written by this file (see docs/lab.md).
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import time

from rank_common import rank_parser, setup_logging  # lab/, this script's directory

log = logging.getLogger("train")
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
HOST = socket.gethostname()
_state = {"step": 0, "at": time.monotonic(), "pending": None}
_entries: list[dict] = []


def _record(op: str, numel: int) -> dict:
    seq = len(_entries) + 1
    entry = {
        "record_id": seq - 1, "pg_id": 0, "process_group": ("0", "default_pg"),
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": f"gloo:{op}", "time_created_ns": time.time_ns(),
        "input_sizes": [[numel]] if numel else [], "output_sizes": [[numel]] if numel else [],
        "input_dtypes": ["Float"] if numel else [], "output_dtypes": ["Float"] if numel else [],
        "state": "scheduled", "retired": False, "timeout_ms": 21_600_000, "is_p2p": False,
        "frames": [],
    }  # fmt: skip
    _entries.append(entry)
    del _entries[:-2000]
    return entry


def dump_flight_recorder(reason: str) -> None:
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if not prefix or not _entries:
        return
    last = _entries[-1]["collective_seq_id"]
    done = max((e["collective_seq_id"] for e in _entries if e["retired"]), default=0)
    trace = {
        "version": "2.10",
        "pg_config": {"": {"name": "", "desc": "", "ranks": str(list(range(WORLD)))}},
        "pg_status": {"0": {"last_enqueued_collective": last, "last_started_collective": -1,
                            "last_completed_collective": done}},
        "entries": list(_entries),
    }  # fmt: skip
    path = f"{prefix}{RANK}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        pickle.dump(trace, f)
    os.replace(path + ".tmp", path)
    log.error("[rank%d] Flight recorder dumped %d entries to %s (%s)", RANK, len(_entries),
              path, reason)  # fmt: skip


def watchdog(timeout_s: float) -> None:
    dumped_for = None
    while True:
        time.sleep(1.0)
        stuck = time.monotonic() - _state["at"]
        if _state["step"] == 0 or stuck < timeout_s or dumped_for == _state["step"]:
            continue
        dumped_for = _state["step"]
        e = _state["pending"]
        if e:
            log.error(
                "[rank%d]:[E] [PG ID 0 PG GUID 0(default_pg) Rank %d] Watchdog caught collective "
                "operation timeout: WorkGloo(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, "
                "Timeout(ms)=%d) ran for %d milliseconds before timing out.",
                RANK, RANK, e["collective_seq_id"],
                e["profiling_name"][5:].replace("_", "").upper(),
                sum(s[0] for s in e["input_sizes"]), sum(s[0] for s in e["input_sizes"]),
                int(timeout_s * 1000), int(stuck * 1000),
            )  # fmt: skip
        dump_flight_recorder("watchdog timeout")


def _wait_forever() -> None:
    while True:
        time.sleep(3600)


def init_process_group(args: argparse.Namespace) -> None:
    """Rendezvous: wait for the shared start time, or forever when the store is unreachable."""
    if args.scenario == "init-hang":
        _connect_store(os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", ""))
    time.sleep(max(0.0, args.start_at - time.time()))


def _connect_store(addr: str, port: str) -> None:
    _wait_forever()


def _read_shard(step: int) -> None:
    log.info("[rank%d] host=%s reading shard %d from /data/shards", RANK, HOST, step)
    r, _w = os.pipe()
    os.read(r, 1)


def load_batch(args: argparse.Namespace, step: int, deadline: float) -> None:
    victim = args.fault_rank == RANK and step >= args.fault_step
    if args.scenario == "dataloader-stall" and victim:
        _read_shard(step)
    if args.scenario == "oom" and victim:
        cache = []
        while True:
            cache.append(bytearray(8 << 20))  # the memory cgroup's OOM killer ends this
    share = 0.95 if args.scenario == "straggler" and victim else 0.4
    time.sleep(max(0.0, share * (deadline - time.time())))


def all_reduce(entry: dict, deadline: float, hang: bool) -> None:
    _state["pending"] = entry
    if hang:
        _wait_forever()
    time.sleep(max(0.0, deadline - time.time()))
    entry["retired"] = True


def barrier(hang: bool) -> None:
    _record("barrier", 0)
    _state["pending"] = _entries[-1]
    if hang:
        _wait_forever()


def train_step(args: argparse.Namespace, step: int, deadline: float) -> None:
    load_batch(args, step, deadline)
    at_fault = step >= args.fault_step
    if args.scenario == "rank-exit" and args.fault_rank == RANK and at_fault:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.scenario == "collective-mismatch" and args.fault_rank == RANK and at_fault:
        barrier(hang=True)
    hangs = at_fault and args.scenario in (
        "rank-exit", "oom", "dataloader-stall", "collective-mismatch", "env-drift",
    )  # fmt: skip
    all_reduce(_record("all_reduce", 8449), deadline, hang=hangs)


def main(argv: list[str] | None = None) -> None:
    p = rank_parser()
    p.add_argument("--start-at", type=float, default=0.0)
    args = p.parse_args(argv)
    setup_logging(RANK)
    log.info(
        "[rank%d] host=%s starting pid=%d world_size=%d master=%s:%s scenario=%s (light)",
        RANK, HOST, os.getpid(), WORLD, os.environ.get("MASTER_ADDR"),
        os.environ.get("MASTER_PORT"), args.scenario,
    )  # fmt: skip
    for key in sorted(os.environ):
        if key.startswith(("NCCL_", "TORCH_", "CUDA_")):
            log.info("[rank%d] env %s=%s", RANK, key, os.environ[key])
    threading.Thread(target=watchdog, args=(args.watchdog_timeout,), daemon=True).start()
    init_process_group(args)
    _state["at"] = time.monotonic()
    step, deadline = 0, args.start_at or time.time()
    while True:
        step += 1
        period = args.step_time
        if args.scenario == "straggler" and step >= args.fault_step:
            period *= args.straggle_factor
        deadline += period
        started = time.monotonic()
        train_step(args, step, deadline)
        log.info(
            "[rank%d] host=%s step=%d loss=%.4f step_time=%.3fs",
            RANK, HOST, step, 2.0 / (1 + step * 0.01), time.monotonic() - started,
        )  # fmt: skip
        _state.update(step=step, at=time.monotonic())


if __name__ == "__main__":
    sys.exit(main())
