"""Tiny gloo training loop used to capture real evidence for the analysis tests.

Not a test. Run under torchrun (or with RANK/WORLD_SIZE set); SCENARIO picks how it misbehaves:
healthy, straggler, outside (rank 3 stuck in a data loader at step 6), mismatch (rank 0 runs an
extra broadcast at step 6), sizes (rank 3 all-reduces a different size at step 6),
tp-rank-stall and tp-mismatch (data + tensor parallel groups, see `Groups`).
A background thread writes the flight-recorder dump (pickle and JSON) when LOGDIR/fr/trigger
appears, because the main thread is blocked in C++ and cannot run a signal handler.
"""

import logging
import os
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace, _dump_fr_trace_json

SCENARIO = os.environ.get("SCENARIO", "healthy")
LOGDIR = os.environ["LOGDIR"]


class SlowLoader:
    """Stands in for a data loader whose worker never returns a batch."""

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            time.sleep(1)


def load_batch_slowly() -> None:
    """One rank reads its shard from a slow disk."""
    time.sleep(1.5)


class Groups:
    """tp-* scenarios: tensor parallel groups [0, 1], [2, 3] and data parallel groups [0, 2],
    [1, 3], made with new_group (dp first, Megatron's descs). Each step runs a tp all_reduce,
    then the dp all_reduce. At step 6 rank 3 deadlocks on a lock it already holds before its tp
    all_reduce (tp-rank-stall) or all-gathers where its tp peer all-reduces (tp-mismatch)."""

    def __init__(self, rank: int) -> None:
        self.lock = threading.Lock()
        for desc, layout in (
            ("DATA_PARALLEL_GROUP", [[0, 2], [1, 3]]),
            ("TENSOR_MODEL_PARALLEL_GROUP", [[0, 1], [2, 3]]),
        ):
            for ranks in layout:
                group = dist.new_group(ranks, group_desc=desc)
                if rank in ranks:
                    setattr(self, desc[0].lower() + "p", group)

    def tensor_parallel(self, rank: int, step: int) -> None:
        activations = torch.ones(256) * (rank + 1)
        if step == 6 and rank == 3 and SCENARIO == "tp-rank-stall":
            with self.lock:
                flush_activation_stats(self.lock)
        if step == 6 and rank == 3 and SCENARIO == "tp-mismatch":
            dist.all_gather([torch.empty(256), torch.empty(256)], activations, group=self.tp)
        else:
            dist.all_reduce(activations, group=self.tp)


def flush_activation_stats(lock: threading.Lock) -> None:
    """Takes the lock its caller already holds: blocked for good, outside any collective."""
    with lock:
        pass


GROUPS: list[Groups] = []


def fr_dumper(rank: int) -> None:
    trigger = os.path.join(LOGDIR, "fr", "trigger")
    prefix = os.environ["TORCH_FR_DUMP_TEMP_FILE"]
    while not os.path.exists(trigger):
        time.sleep(0.2)
    with open(f"{prefix}{rank}", "wb") as f:
        f.write(_dump_fr_trace())
    with open(f"{prefix}{rank}.json", "wb") as f:
        f.write(_dump_fr_trace_json())


def train_step(rank: int, world: int, step: int, log: logging.Logger) -> None:
    started = time.monotonic()
    grad = torch.ones(1024) * (rank + 1)
    if SCENARIO == "straggler" and rank == 2:
        load_batch_slowly()
    if step == 6 and SCENARIO == "outside" and rank == 3:
        next(iter(SlowLoader()))
    if step == 6 and SCENARIO == "mismatch" and rank == 0:
        dist.broadcast(grad, src=0)
    if step == 6 and SCENARIO == "sizes" and rank == 3:
        grad = torch.ones(2048)
    if GROUPS:
        GROUPS[0].tensor_parallel(rank, step)
    dist.all_reduce(grad, group=GROUPS[0].dp if GROUPS else None)
    time.sleep(0.05 if SCENARIO == "straggler" else 0.2)
    loss = 2.5 / step
    elapsed = time.monotonic() - started
    log.info(
        "[rank%d] host=%s step=%d loss=%.4f step_time=%.3fs",
        rank,
        socket.gethostname(),
        step,
        loss,
        elapsed,
    )
    print(f"step {step} done", flush=True)


def main() -> None:
    if os.environ.get("ENV_SKEW") and os.environ["RANK"] == "3" and "SKEWED" not in os.environ:
        # A leftover debugging variable on one rank only, as /proc/PID/environ will show it.
        env = dict(os.environ, NCCL_SOCKET_IFNAME="eth1", NCCL_IB_DISABLE="1", SKEWED="1")
        os.execve(sys.executable, [sys.executable, *sys.argv], env)  # noqa: S606 - argv, no shell
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    log = logging.getLogger("train")
    handler = logging.FileHandler(os.path.join(LOGDIR, f"rank{rank}.log"))
    formatter = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.info("[rank%d] starting pid=%d world_size=%d", rank, os.getpid(), world)
    threading.Thread(target=fr_dumper, args=(rank,), daemon=True).start()
    dist.init_process_group("gloo")
    if SCENARIO.startswith("tp-"):
        GROUPS.append(Groups(rank))
    step = 0
    while True:
        step += 1
        train_step(rank, world, step, log)
        if step >= int(os.environ.get("MAX_STEPS", "100000")):
            break
    dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
