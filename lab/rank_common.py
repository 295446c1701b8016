"""What a torch rank (train.py) and a light rank (light_train.py) share: their command line
and their log file. Imported by both scripts from their own directory; no torch here."""

from __future__ import annotations

import argparse
import logging
import os
import time


def rank_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="healthy")
    parser.add_argument("--fault-rank", type=int, default=-1)
    parser.add_argument("--fault-step", type=int, default=10)
    parser.add_argument("--step-time", type=float, default=0.5)
    parser.add_argument("--straggle-factor", type=float, default=4.0)
    parser.add_argument("--watchdog-timeout", type=float, default=10.0)
    return parser


def setup_logging(rank: int) -> None:
    """One log file per rank, the common step-line format, timestamps in UTC."""
    path = os.path.join(os.environ.get("TRAIN_LOG_DIR", "/var/log/train"), f"rank{rank}.log")
    handler = logging.FileHandler(path)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s")
    fmt.converter = time.gmtime
    handler.setFormatter(fmt)
    logging.basicConfig(level=logging.INFO, handlers=[handler])


# Scenarios whose job builds data-parallel and tensor-parallel groups (dist.new_group).
GROUP_SCENARIOS = ("tp-rank-stall", "tp-mismatch", "tp-rank-exit")
# Group descriptions as Megatron-LM passes them to new_group (every TP group has the same desc;
# the flight recorder tells groups apart by their name, a counter shared by all ranks).
DP_DESC = "DATA_PARALLEL_GROUP"
TP_DESC = "TENSOR_MODEL_PARALLEL_GROUP"


def parallel_groups(world: int, tp_size: int) -> dict[str, list[list[int]]]:
    """The group layout of the lab's data + tensor parallel scenarios.

    Tensor parallel inside a node (the ranks of one node, tp_size of them), data parallel
    across nodes (the same local rank on every node). World 4, tp 2: tp [[0, 1], [2, 3]],
    dp [[0, 2], [1, 3]]. The job creates the dp groups first, then the tp groups (Megatron's
    order), so with world 4 the group names are dp "1", "2" and tp "3", "4".
    """
    nodes = world // tp_size
    tp = [list(range(n * tp_size, (n + 1) * tp_size)) for n in range(nodes)]
    dp = [list(range(local, world, tp_size)) for local in range(tp_size)]
    return {"dp": dp, "tp": tp}
