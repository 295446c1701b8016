"""Capture real evidence from a small gloo job for the analysis tests.

Not a test. Usage (as root, from the repo):
    .venv/bin/python tests/analysis/samples/capture/capture.py SCENARIO [--snapshots 2]
 Writes tests/analysis/samples/<scenario>/ and stops every process it
started (by process group).
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
VENV = REPO / ".venv" / "bin"
PORTS = {
    "healthy": 29611,
    "straggler": 29612,
    "outside": 29613,
    "mismatch": 29614,
    "sizes": 29615,
    "init": 29616,
    "tp-rank-stall": 29617,
    "tp-mismatch": 29618,
}


STARTED: set[int] = set()


def session_pids(roots: list[int]) -> list[int]:
    """The launcher and its descendants (torchrun puts workers in their own sessions)."""
    parent_of = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent_of[int(entry)] = (int(fields[1]), int(fields[3]))  # ppid, session
    tree = {pid for pid in roots if pid in parent_of}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in parent_of.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    STARTED.update(tree)
    return sorted(tree)


def rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"RANK="):
            return int(item[5:])
    return None


def snapshot(out: Path, roots: list[int], workdir: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC).isoformat()
    (out / "snapshot.json").write_text(json.dumps({"collected_at": started}) + "\n")
    pids = session_pids(roots)
    ps = subprocess.run(
        ["ps", "-o", "pid,ppid,stat,etimes,args", "-p", ",".join(map(str, pids))],
        capture_output=True,
        text=True,
        timeout=10,
    ).stdout
    (out / "ps.txt").write_text(ps)
    for pid in pids:
        if rank_of(pid) is None:
            continue
        (out / f"environ_{pid}").write_bytes(Path(f"/proc/{pid}/environ").read_bytes())
        for fmt, args in (("json", ["--json"]), ("txt", [])):
            res = subprocess.run(
                [str(VENV / "py-spy"), "dump", "--pid", str(pid), *args],
                capture_output=True,
                text=True,
                timeout=60,
            )
            target = out / f"pyspy_{pid}.{fmt}"
            target.write_text(res.stdout if res.returncode == 0 else "")
            if res.returncode != 0:
                (out / f"pyspy_{pid}.err").write_text(res.stderr)
    for log in sorted(workdir.glob("*.log")):
        lines = log.read_text(errors="replace").splitlines(keepends=True)
        # The launcher's stdout whole, as the snapshot saw it; the ranks' last 40 lines.
        (out / log.name).write_text("".join(lines if log.name == "torchrun.log" else lines[-40:]))
    sample_window(out, [pid for pid in pids if rank_of(pid) is not None])


def sample_window(out: Path, pids: list[int], seconds: int = 2) -> None:
    """The probe's sampling window: `py-spy record --format raw` of every rank at once."""
    running = {
        pid: subprocess.Popen(
            [
                str(VENV / "py-spy"), "record", "--pid", str(pid), "--duration", str(seconds),
                "--rate", "50", "--format", "raw", "--output", str(out / f"samples_{pid}.txt"),
                "--idle", "--threads", "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in pids
    }  # fmt: skip
    for proc in running.values():
        proc.wait(timeout=seconds + 30)


def wait_for_step(workdir: Path, scenario: str) -> None:
    """Start the clock only once the job got going: a loaded machine starts torch slowly."""
    if scenario == "init":
        time.sleep(5)
        return
    wanted = "step=3 " if scenario in ("healthy", "straggler") else "step=5 "
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        logs = list(workdir.glob("rank*.log"))
        if len(logs) == 4 and all(wanted in f.read_text() for f in logs):
            return
        time.sleep(0.5)
    raise SystemExit(f"{scenario}: the job did not reach {wanted.strip()} in 180 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=sorted(PORTS))
    parser.add_argument("--snapshots", type=int, default=1)
    parser.add_argument("--settle", type=float, default=6.0, help="seconds after the hang")
    parser.add_argument("--env-skew", action="store_true")
    parser.add_argument("--ranks", type=int, default=4, help="ranks expected to write a dump")
    args = parser.parse_args()
    workdir = Path("/tmp/hd-capture") / args.scenario
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "fr").mkdir(parents=True)
    env = dict(
        os.environ,
        SCENARIO=args.scenario,
        LOGDIR=str(workdir),
        TORCH_FR_BUFFER_SIZE="2000",
        TORCH_FR_DUMP_TEMP_FILE=str(workdir / "fr/trace_rank_"),
        NCCL_DEBUG="INFO",
        TORCH_NCCL_DUMP_ON_TIMEOUT="1",
        GLOO_SOCKET_IFNAME="lo",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(PORTS[args.scenario]),
        OMP_NUM_THREADS="1",
    )
    if args.env_skew:
        env["ENV_SKEW"] = "1"
    script = str(HERE / "train_lab.py")
    launcher_log = open(workdir / "torchrun.log", "w")  # noqa: SIM115 - lives as long as the job
    if args.scenario == "init":
        # Three of four ranks: the rendezvous never completes.
        roots = []
        for rank in range(3):
            renv = dict(
                env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="4", LOCAL_WORLD_SIZE="4"
            )
            proc = subprocess.Popen(
                [str(VENV / "python"), script],
                env=renv,
                stdout=launcher_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            roots.append(proc.pid)
    else:
        proc = subprocess.Popen(
            [
                str(VENV / "torchrun"),
                "--nnodes",
                "1",
                "--nproc-per-node",
                "4",
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                str(PORTS[args.scenario]),
                "--tee",
                "3",
                script,
            ],
            env=env,
            stdout=launcher_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        roots = [proc.pid]
    STARTED.update(roots)
    try:
        wait_for_step(workdir, args.scenario)
        time.sleep(args.settle)
        dest = HERE.parent / args.scenario
        shutil.rmtree(dest, ignore_errors=True)
        for n in range(args.snapshots):
            snapshot(dest if args.snapshots == 1 else dest / f"snap{n}", roots, workdir)
            if n + 1 < args.snapshots:
                time.sleep(3)
        session_pids(roots)
        (workdir / "fr" / "trigger").touch()
        # Writing the dump can take tens of seconds while a collective is pending.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            dumps = [f for f in (workdir / "fr").glob("trace_rank_*.json") if f.stat().st_size]
            if len(dumps) >= args.ranks:
                break
            time.sleep(1)
        time.sleep(1)
        frdest = dest / "fr"
        frdest.mkdir(exist_ok=True)
        for f in sorted((workdir / "fr").glob("trace_rank_*")):
            shutil.copy(f, frdest / f.name)
        shutil.copy(workdir / "torchrun.log", dest / "torchrun.log")
        meta = {
            "scenario": args.scenario,
            "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (dest / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    finally:
        for pid in STARTED:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        launcher_log.close()
    print("captured", dest, file=sys.stderr)


if __name__ == "__main__":
    main()
