"""Time `hangdesk diagnose` (target: under 0.5 s) and `manage.py diagnose --bundle` (under 1 s) on
an 8-rank bundle, start-up included.

The bundle holds 2 nodes x 4 ranks of real captured evidence (the `outside` lab scenario
replicated by `bench_analysis.build_snapshot`: environments, py-spy dumps, training logs,
gloo flight-recorder pickles, `ps`, a published nvidia-smi table), written through
`collectors.bundles.write_bundle` exactly as `manage.py bundle export` writes one.

Each run is a fresh process, as an SRE runs it: wall time, and the CPU time the kernel
accounts to the finished child (user + sys). One warm-up run is not counted (it also writes
the .pyc files after a source change).

    .venv/bin/python bench/bench_diagnose_cli.py [--runs 9] [--hangdesk PATH | --manage]
    .venv/bin/python bench/bench_diagnose_cli.py --keep /tmp/b8.tar.gz   # keep the bundle
    .venv/bin/python bench/bench_diagnose_cli.py --importtime            # what start-up imports

`--hangdesk PATH` times an installed command (`pip install .` into a fresh virtualenv: its
`bin/hangdesk`); without it, `python -m hangdesk` from this checkout; `--manage` times
`manage.py diagnose --bundle` with no settings named (the offline settings).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_analysis import build_snapshot  # noqa: E402
from collectors.bundles import write_bundle  # noqa: E402


def write_fixture(path: Path, ranks: int = 8, nodes: int = 2) -> None:
    # Rank 3 is the captured stuck rank (outside any collective): verdict A.
    path.write_bytes(write_bundle(build_snapshot(ranks, nodes, stuck_rank=3)))


def run_once(command: list[str], env: dict[str, str]) -> tuple[float, float, str, int]:
    """(wall s, child CPU s, stdout, exit status) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.decode(), done.returncode


def top_imports(command: list[str], env: dict[str, str], floor_ms: float = 10.0) -> None:
    """Top-level imports of one run by cumulative time (`python -X importtime`)."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        _self, cumulative, name = line[len("import time:") :].split("|")
        if not name.startswith("  "):  # one leading space: imported by the program itself
            rows.append((int(cumulative) / 1000, name.strip()))
    total = sum(ms for ms, _ in rows)
    print(f"top-level imports: {total:.0f} ms in all; those of {floor_ms:g} ms or more:")
    for ms, name in sorted(rows, reverse=True):
        if ms >= floor_ms:
            print(f"  {ms:7.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--keep", type=Path, help="write the bundle here and keep it")
    parser.add_argument("--importtime", action="store_true", help="list start-up imports")
    parser.add_argument("--hangdesk", help="an installed hangdesk command to time")
    parser.add_argument("--manage", action="store_true", help="time manage.py diagnose --bundle")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    with tempfile.TemporaryDirectory() as scratch:
        bundle = args.keep or Path(scratch) / "8-ranks.tar.gz"
        write_fixture(bundle)
        size = bundle.stat().st_size
        if args.manage:
            command = [sys.executable, "manage.py", "diagnose", "--bundle", str(bundle)]
        elif args.hangdesk:
            command = [args.hangdesk, "diagnose", str(bundle)]
        else:
            command = [sys.executable, "-m", "hangdesk", "diagnose", str(bundle)]
        if args.importtime:
            top_imports(command, env)
            return
        load_before = os.getloadavg()
        run_once(command, env)  # warm-up
        runs = [run_once(command, env) for _ in range(args.runs)]
        load_after = os.getloadavg()
    outputs = {out for _, _, out, _ in runs}
    codes = {code for *_, code in runs}
    for label, index in (("wall", 0), ("CPU", 1)):
        values = [run[index] for run in runs]
        print(
            f"{label:>4}: median {statistics.median(values):.3f} s "
            f"(min {min(values):.3f}, max {max(values):.3f}) over {len(values)} runs"
        )
    print(
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} "
        f"on {os.cpu_count()} cores; exit status {sorted(codes)}; bundle {size:,} bytes"
    )
    print(f"output ({'identical' if len(outputs) == 1 else 'DIFFERS'} in every run):")
    print(runs[-1][2].rstrip())


if __name__ == "__main__":
    main()
