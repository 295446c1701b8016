"""The lab's Ray job: the driver `ray job submit` runs on the head, and the training function
every Ray Train worker runs (a `TorchTrainer` on CPU, gloo).

The workers run the lab's own training step (lab/train.py: load_batch, the gradient
all_reduce, the scenario's fault at the fault step) with the rank Ray Train gives them, log
their steps to /var/log/train/rank<R>.log on their node as every lab rank does, and hand
their gloo connections to the node's PID 1 (the socket holder), so a worker that dies leaves
its peers waiting in the collective, as under NCCL. Ray's own sockets are never handed over:
the raylet must see a dead worker's connection close to report its death.

Run by the lab only (lab/raylab.py), with lab/ on PYTHONPATH (the workers import train.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import socket
import threading
import time


def _gloo_sockets() -> list[int]:
    """This process's TCP sockets on 127.0.0.1 (gloo's pairs: GLOO_SOCKET_IFNAME=lo), not
    Ray's (its gRPC runs on the node address, its raylet link is a Unix socket)."""
    local = set()
    with open("/proc/self/net/tcp") as table:
        for row in table.read().splitlines()[1:]:
            cells = row.split()
            if cells[1].split(":")[0] == "0100007F" and cells[3] == "01":  # established
                local.add(cells[9])
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in local:
            fds.append(int(name))
    return fds


def hand_gloo_sockets(rank: int) -> int:
    path = os.environ.get("HANGDESK_LAB_HOLDER_SOCKET")
    fds = _gloo_sockets()
    if not path or not fds:
        return 0
    holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    holder.connect(path)
    socket.send_fds(holder, [f"rank{rank}".encode()], fds[:250])
    holder.detach()  # kept open: the holder counts a closed connection as the rank gone
    return len(fds)


def _logger(rank: int) -> logging.Logger:
    log = logging.getLogger("train")  # the logger lab/train.py's functions use
    path = os.path.join(os.environ.get("TRAIN_LOG_DIR", "/var/log/train"), f"rank{rank}.log")
    handler = logging.FileHandler(path)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    fmt.converter = time.gmtime
    handler.setFormatter(fmt)
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
    return log


def train_loop(config: dict) -> None:
    import ray.train
    import torch
    import torch.distributed as dist

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    os.environ["RANK"] = str(rank)  # Ray Train's torch backend set it; train.py reads it
    import train as lab  # lab/train.py, after RANK is known (it reads it at import)

    log = _logger(rank)
    host = socket.gethostname()
    log.info(
        "[rank%d] host=%s starting pid=%d world_size=%d world_rank=%d local_rank=%d "
        "scenario=%s (Ray Train worker)",
        rank, host, os.getpid(), world, rank, ctx.get_local_rank(), config["scenario"],
    )  # fmt: skip
    lab.log_environment()
    threading.Thread(target=lab.watchdog, args=(config["watchdog_timeout"],), daemon=True).start()
    dist.barrier()
    held = hand_gloo_sockets(rank)
    log.info("[rank%d] host=%s process group ready (%d connections held)", rank, host, held)
    args = argparse.Namespace(
        scenario=config["scenario"], fault_rank=config["fault_rank"],
        fault_step=config["fault_step"], step_time=config["step_time"], straggle_factor=4.0,
        drift_var="NCCL_SOCKET_IFNAME", drift_marker="eth1",
    )  # fmt: skip
    torch.manual_seed(0)
    model = lab.TinyModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lab._progress.update(phase="train", at=time.monotonic(), step=0)
    for step in range(1, 1_000_000):
        started = time.monotonic()
        loss = lab.train_step(args, model, opt, step, world)
        took = time.monotonic() - started
        log.info("[rank%d] host=%s step=%d loss=%.4f step_time=%.3fs", rank, host, step, loss, took)
        lab._progress.update(step=step, at=time.monotonic())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", default="healthy")
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--fault-rank", type=int, default=-1)
    p.add_argument("--fault-step", type=int, default=10)
    p.add_argument("--step-time", type=float, default=0.5)
    p.add_argument("--watchdog-timeout", type=float, default=10.0)
    p.add_argument("--run-name", required=True)
    p.add_argument("--storage", required=True)
    args = p.parse_args()

    import ray
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    ray.init(address="auto")
    config = {k: getattr(args, k) for k in ("scenario", "fault_rank", "fault_step", "step_time")}
    config["watchdog_timeout"] = args.watchdog_timeout
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=ScalingConfig(num_workers=args.world, use_gpu=False),
        # Hours, like the lab's other jobs: peers keep waiting as under a long NCCL timeout.
        torch_config=TorchConfig(backend="gloo", timeout_s=int(dt.timedelta(hours=6).seconds)),
        run_config=RunConfig(
            name=args.run_name, storage_path=args.storage,
            failure_config=FailureConfig(max_failures=0),
        ),
    )  # fmt: skip
    trainer.fit()


if __name__ == "__main__":
    main()
