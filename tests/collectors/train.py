"""A stand-in training rank: logs a few steps like a real rank, then waits "in a collective".

Started by the collector tests so that process discovery, /proc/PID/environ and py-spy are
exercised against a real Python process. Usage: train.py --job <token> --log-dir <dir>
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from pathlib import Path


def fake_all_gather() -> None:
    # Where a hung rank sits: py-spy should find this frame.
    while True:
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job", required=True)
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    handler = logging.FileHandler(Path(args.log_dir) / f"rank{rank}.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.Formatter.converter = time.gmtime
    log = logging.getLogger("train")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    for step in range(1, 4):
        log.info(
            "[rank%d] host=%s step=%d loss=%.4f step_time=0.010s",
            rank,
            socket.gethostname(),
            step,
            2.5 - step / 10,
        )
    handler.flush()
    fake_all_gather()


if __name__ == "__main__":
    main()
