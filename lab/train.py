"""The lab's training job: a tiny real PyTorch data-parallel job on gloo (CPU); in the
tp-* scenarios, data + tensor parallel with a process group per parallel dimension.

Every rank runs this file, started by its node's launcher (lab/node.py) with the usual
multi-node environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT, NCCL_*, TORCH_*).
The command line names the scenario so the job can fail on purpose in one of the ways
docs/lab.md describes. It is run as a script (`python .../lab/train.py`) so that process
discovery with the usual pattern (torchrun|pretrain_gpt|megatron|train.py) finds it.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import logging
import math
import os
import pickle
import signal
import socket
import sys
import threading
import time

# SIGUSR1 asks for a flight-recorder dump. The main thread spends its life blocked in C++
# (inside a collective), where Python signal handlers never run, so the signal is blocked
# here, before torch starts any thread, and a dedicated thread waits for it (sigwait).
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from rank_common import (  # noqa: E402 - lab/, this script's dir
    DP_DESC,
    GROUP_SCENARIOS,
    TP_DESC,
    parallel_groups,
    rank_parser,
    setup_logging,
)

log = logging.getLogger("train")
RANK = int(os.environ.get("RANK", "0"))
HOST = socket.gethostname()
_progress = {"step": -1, "at": time.monotonic(), "phase": "init"}
_own_threads: set[int] = set()
_timers = {"data": 0.0, "compute": 0.0, "comm": 0.0}
# Group name (the flight recorder's process_group[0]) -> its global ranks, for the group-local
# rank torch puts in its log prefix.
_group_ranks: dict[str, list[int]] = {}


def nccl_info(msg: str) -> None:
    """A line in the shape NCCL_DEBUG=INFO prints, so NCCL-log parsing has real input."""
    local = os.environ.get("LOCAL_RANK", "0")
    print(f"{HOST}:{os.getpid()}:{os.getpid()} [{local}] NCCL INFO {msg}", flush=True)


def dump_flight_recorder(reason: str) -> str | None:
    """Write this rank's flight-recorder buffer where a real job would: prefix + rank."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get(
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
    )
    if not prefix or not dist.is_initialized():
        return None
    data = torch._C._distributed_c10d._dump_fr_trace()
    path = f"{prefix}{RANK}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    entries = pickle.loads(data).get("entries", [])  # noqa: S301 -- torch just made it
    log.error(
        "[rank%d] Flight recorder dumped %d entries to %s (%s)", RANK, len(entries), path, reason
    )
    return path


def watchdog(timeout_s: float) -> None:
    """Like the NCCL watchdog with TORCH_NCCL_DUMP_ON_TIMEOUT=1, but shorter than the
    process-group timeout: if no step completes for timeout_s, report and dump once."""
    _own_threads.add(threading.get_native_id())
    dumped_for = None
    while True:
        time.sleep(1.0)
        stuck = time.monotonic() - _progress["at"]
        if _progress["phase"] == "init" or stuck < timeout_s or dumped_for == _progress["step"]:
            continue
        dumped_for = _progress["step"]
        report_timeout(stuck, timeout_s)
        dump_flight_recorder("watchdog timeout")


def report_timeout(stuck: float, timeout_s: float) -> None:
    """Log what the NCCL watchdog logs, built from the pending flight-recorder entry."""
    trace = pickle.loads(torch._C._distributed_c10d._dump_fr_trace())  # noqa: S301
    pending = [e for e in trace.get("entries", []) if not e.get("retired")]
    status = next(iter(trace.get("pg_status", {}).values()), {})
    if not pending:
        log.error(
            "[rank%d] Watchdog: no collective pending but no progress for %.0f s after step %d",
            RANK, stuck, _progress["step"],
        )  # fmt: skip
        return
    e = pending[0]
    # pg_status is keyed by the local PG ID (this rank's own count of its groups), the entry
    # names its group by the global name; torch's prefix carries the rank within the group.
    status = trace.get("pg_status", {}).get(str(e["pg_id"]), status)
    members = _group_ranks.get(str(e["process_group"][0]))
    group_rank = members.index(RANK) if members and RANK in members else RANK
    numel = sum(math.prod(s) for s in e.get("input_sizes") or [[0]])
    numel_out = sum(math.prod(s) for s in e.get("output_sizes") or [[0]])
    op = e["profiling_name"].split(":")[-1].replace("_", "").upper()
    log.error(
        "[rank%d]:[E] [PG ID %s PG GUID %s(%s) Rank %d] Watchdog caught collective operation "
        "timeout: WorkGloo(SeqNum=%d, OpType=%s, NumelIn=%d, NumelOut=%d, Timeout(ms)=%d) ran "
        "for %d milliseconds before timing out.",
        RANK, e["pg_id"], e["process_group"][0], e["process_group"][1], group_rank,
        e["collective_seq_id"], op, numel, numel_out, int(timeout_s * 1000), int(stuck * 1000),
    )  # fmt: skip
    log.error(
        "[rank%d]:[E] [PG ID %s PG GUID %s(%s) Rank %d] last enqueued work: %s, last completed "
        "work: %s",
        RANK, e["pg_id"], e["process_group"][0], e["process_group"][1], group_rank,
        status.get("last_enqueued_collective"), status.get("last_completed_collective"),
    )  # fmt: skip


def dump_on_signal() -> None:
    _own_threads.add(threading.get_native_id())
    while True:
        signal.sigwait({signal.SIGUSR1})
        dump_flight_recorder("SIGUSR1")


def hand_sockets_to_launcher() -> None:
    """Give copies of this rank's sockets to the node launcher, which keeps them open.

    With NCCL, peers of a dead rank keep waiting inside the collective; gloo instead sees
    the TCP connection close and raises. Holding duplicates of the connections in a process
    that outlives the rank keeps them open, so the peers block exactly like under NCCL.
    """
    fd_text = os.environ.get("HANGDESK_LAB_HOLDER_FD")
    path = os.environ.get("HANGDESK_LAB_HOLDER_SOCKET")  # under Slurm: the node's listener
    if path:
        holder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        holder.connect(path)
    elif fd_text:
        holder = socket.socket(fileno=int(fd_text))
    else:
        return
    fds = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:") and fd != holder.fileno():
            fds.append(fd)
    socket.send_fds(holder, [f"rank{RANK}".encode()], fds[:250])
    holder.detach()


def park_comm_threads() -> None:
    """Stop servicing the transport: every thread but the main one and ours sleeps for good.

    gloo ignores NCCL_* variables, so the lab makes the drifted node's ranks behave the way
    a protocol/interface mismatch behaves under NCCL: the rank enters the collective and the
    bytes never move. The threads sleep in pause() inside a signal handler.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    sig = signal.SIGRTMIN + 3
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal(sig, ctypes.cast(libc.pause, ctypes.c_void_p))
    me = threading.get_native_id()
    for tid in map(int, os.listdir("/proc/self/task")):
        if tid in (me, *_own_threads):
            continue
        libc.syscall(234, os.getpid(), tid, sig)  # tgkill


class TinyModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _read_shard(step: int, stall: bool) -> None:
    """Fetch the next shard from 'storage'. A stalled read blocks like a hung NFS read."""
    if stall:
        log.info("[rank%d] host=%s reading shard %d from /data/shards", RANK, HOST, step)
        r, _w = os.pipe()
        os.read(r, 1)  # nobody ever writes: blocked in the kernel, state S


def load_batch(args: argparse.Namespace, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU-side data loading; this is where the step's pacing time is spent."""
    pace = args.step_time
    if args.scenario == "straggler" and args.fault_rank == RANK and step >= args.fault_step:
        pace *= args.straggle_factor
    time.sleep(pace)
    _read_shard(
        step,
        args.scenario == "dataloader-stall" and args.fault_rank == RANK and step >= args.fault_step,
    )
    if args.scenario == "oom" and args.fault_rank == RANK and step >= args.fault_step:
        grow_cache()
    gen = torch.Generator().manual_seed(step * 1000 + RANK)
    x = torch.randn(32, 64, generator=gen)
    return x, x.sum(dim=1, keepdim=True) * 0.1


def grow_cache() -> None:
    """A leak: keep every batch forever. The memory cgroup's OOM killer ends it."""
    log.info("[rank%d] host=%s caching decoded samples in memory", RANK, HOST)
    cache = []
    while True:
        cache.append(torch.ones(16 * 1024 * 1024))  # 64 MiB each, touched


def all_reduce_gradients(model: torch.nn.Module, world: int, group=None) -> None:
    """What DDP does after backward: one flat all-reduce of every gradient."""
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    dist.all_reduce(flat, group=group)
    flat /= world
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p))
        offset += n


def sync_eval_writer() -> None:
    """The bug of the collective-mismatch scenario: only one rank waits for the eval writer."""
    dist.barrier()


def train_step(args, model, opt, step: int, world: int) -> float:
    t0 = time.monotonic()
    x, y = load_batch(args, step)
    t1 = time.monotonic()
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    fault_now = args.fault_rank == RANK and step == args.fault_step
    if args.scenario == "rank-exit" and fault_now:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.scenario == "collective-mismatch" and fault_now:
        sync_eval_writer()
    drifted = os.environ.get(args.drift_var) == args.drift_marker
    if args.scenario == "env-drift" and step == args.fault_step and drifted:
        park_comm_threads()
    t2 = time.monotonic()
    all_reduce_gradients(model, world)
    opt.step()
    _timers.update(data=t1 - t0, compute=t2 - t1, comm=time.monotonic() - t2)
    return float(loss)


# ---------------------------------------------------------------- data + tensor parallel


class Parallel:
    """This rank's data-parallel and tensor-parallel groups (see rank_common.parallel_groups)."""

    def __init__(self, world: int, tp_size: int) -> None:
        layout = parallel_groups(world, tp_size)
        self.dp = self.tp = None
        self.dp_ranks: list[int] = []
        self.tp_ranks: list[int] = []
        # Every rank creates every group, in the same order (new_group is collective).
        for kind, desc in (("dp", DP_DESC), ("tp", TP_DESC)):
            for ranks in layout[kind]:
                group = dist.new_group(ranks, group_desc=desc)
                if RANK in ranks:
                    setattr(self, kind, group)
                    setattr(self, f"{kind}_ranks", ranks)
                    _group_ranks[group.group_name] = ranks
        log.info(
            "[rank%d] host=%s data parallel group %s ranks=%s, tensor parallel group %s ranks=%s",
            RANK, HOST, self.dp.group_name, self.dp_ranks, self.tp.group_name, self.tp_ranks,
        )  # fmt: skip


def reduce_tensor_parallel(hidden: torch.Tensor, par: Parallel) -> torch.Tensor:
    """A row-parallel layer's output: the partial sums of the tp ranks, all-reduced."""
    partial = hidden.detach().clone()
    dist.all_reduce(partial, group=par.tp)
    return hidden + (partial / len(par.tp_ranks) - hidden).detach()


def gather_sequence_parallel(hidden: torch.Tensor, par: Parallel) -> torch.Tensor:
    """The bug of tp-mismatch: this rank alone runs with sequence parallelism, so it
    all-gathers where its tensor-parallel peers all-reduce."""
    parts = [torch.empty_like(hidden) for _ in par.tp_ranks]
    dist.all_gather(parts, hidden.detach().contiguous(), group=par.tp)
    return hidden + (torch.stack(parts).mean(dim=0) - hidden).detach()


_stats_lock = threading.Lock()
_stats: dict[int, float] = {}


def record_activation_stats(step: int, hidden: torch.Tensor, flush: bool) -> None:
    """Activation statistics for the metrics exporter, under the lock it shares with it."""
    with _stats_lock:
        _stats[step] = float(hidden.detach().abs().mean())
        if flush:
            log.info("[rank%d] host=%s flushing activation stats", RANK, HOST)
            flush_activation_stats()


def flush_activation_stats() -> None:
    """The bug of tp-rank-stall: takes the (not re-entrant) lock its caller already holds,
    so the rank blocks for good outside any collective (state S, in a futex)."""
    with _stats_lock:
        _stats.clear()


def train_step_parallel(args, model, opt, step: int, par: Parallel) -> float:
    """One step of the data + tensor parallel job: the tp all_reduce inside the forward, the
    dp all_reduce of the gradients after backward."""
    t0 = time.monotonic()
    x, y = load_batch(args, step)
    t1 = time.monotonic()
    opt.zero_grad()
    fault_now = args.fault_rank == RANK and step == args.fault_step
    hidden = model.net[1](model.net[0](x))
    record_activation_stats(step, hidden, args.scenario == "tp-rank-stall" and fault_now)
    if args.scenario == "tp-rank-exit" and fault_now:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.scenario == "tp-mismatch" and fault_now:
        hidden = gather_sequence_parallel(hidden, par)
    else:
        hidden = reduce_tensor_parallel(hidden, par)
    loss = torch.nn.functional.mse_loss(model.net[2](hidden), y)
    loss.backward()
    t2 = time.monotonic()
    all_reduce_gradients(model, len(par.dp_ranks), group=par.dp)
    opt.step()
    _timers.update(data=t1 - t0, compute=t2 - t1, comm=time.monotonic() - t2)
    return float(loss)


def log_environment() -> None:
    """Dump the NCCL/TORCH/CUDA environment at start-up, as the runbook recommends."""
    for key in sorted(os.environ):
        if key.startswith(("NCCL_", "TORCH_", "CUDA_")):
            log.info("[rank%d] env %s=%s", RANK, key, os.environ[key])
    ifname = os.environ.get("NCCL_SOCKET_IFNAME", "")
    nccl_info(f"NCCL_SOCKET_IFNAME set by environment to {ifname}")
    nccl_info(f"NET/Socket : Using [0]{ifname}:{os.environ.get('MASTER_ADDR', '')}<0>")


def main(argv: list[str] | None = None) -> None:
    p = rank_parser()
    p.add_argument("--drift-var", default="NCCL_SOCKET_IFNAME")
    p.add_argument("--drift-marker", default="eth1")
    p.add_argument("--max-steps", type=int, default=1_000_000)
    args = p.parse_args(argv)

    setup_logging(RANK)
    world = int(os.environ["WORLD_SIZE"])
    log.info(
        "[rank%d] host=%s starting pid=%d world_size=%d master=%s:%s scenario=%s",
        RANK, HOST, os.getpid(), world, os.environ.get("MASTER_ADDR"),
        os.environ.get("MASTER_PORT"), args.scenario,
    )  # fmt: skip
    log_environment()
    threading.Thread(target=watchdog, args=(args.watchdog_timeout,), daemon=True).start()
    threading.Thread(target=dump_on_signal, daemon=True).start()

    # Hours, not minutes: peers must keep waiting in the collective like a long NCCL timeout.
    dist.init_process_group("gloo", timeout=dt.timedelta(hours=6))
    dist.barrier()
    par = None
    if args.scenario in GROUP_SCENARIOS:
        par = Parallel(world, int(os.environ["LOCAL_WORLD_SIZE"]))
    hand_sockets_to_launcher()
    log.info("[rank%d] host=%s process group ready", RANK, HOST)

    torch.manual_seed(0)
    model = TinyModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    _progress.update(phase="train", at=time.monotonic(), step=0)
    for step in range(1, args.max_steps + 1):
        started = time.monotonic()
        if par is None:
            loss = train_step(args, model, opt, step, world)
        else:
            loss = train_step_parallel(args, model, opt, step, par)
        took = time.monotonic() - started
        log.info("[rank%d] host=%s step=%d loss=%.4f step_time=%.3fs", RANK, HOST, step, loss, took)
        # Per-rank breakdown (no "step=" in it): the straggler is the one with the long
        # data time; everyone else's time goes to comm_wait.
        log.info(
            "[rank%d] host=%s timers data=%.3fs compute=%.3fs comm_wait=%.3fs",
            RANK, HOST, _timers["data"], _timers["compute"], _timers["comm"],
        )  # fmt: skip
        _progress.update(step=step, at=time.monotonic())
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
