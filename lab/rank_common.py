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
