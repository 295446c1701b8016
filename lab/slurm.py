"""Real Slurm for the lab (`python -m lab up --slurm`): Debian's munged, slurmdbd (on the
machine's MariaDB, when it answers), slurmctld on the host, and one `slurmd -N <node>` inside
every lab node's namespaces, each on its own loopback port. The training job is submitted with
`sbatch`; its batch script runs `srun --label` on the lab nodes, so the ranks are slurmstepd's
children in the node's own process table, with SLURM_PROCID in their environment.

Everything lives under <state-dir>/slurm/: etc/ (slurm.conf, slurmdbd.conf, the munge key:
bind-mounted on /etc/slurm inside every node, so `scontrol` there needs no SLURM_CONF, as on a
real cluster), munge/, ctld/ (state save), spool/<node>/, log/, and ranks.json (what each task
runs). Every daemon's pid is written to lab-state.json before anything else happens, and `down`
stops each by pid (its command line checked first), then drops the accounting database.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = {
    "munged": "/usr/sbin/munged",
    "slurmctld": "/usr/sbin/slurmctld",
    "slurmd": "/usr/sbin/slurmd",
    "slurmdbd": "/usr/sbin/slurmdbd",
}
CLIENTS = ("sbatch", "scontrol", "sacct", "squeue", "sinfo")
PACKAGES = "apt-get install munge slurmctld slurmd slurmdbd slurm-client"
TASK_SCRIPT = Path(__file__).resolve().with_name("slurm_task.py")
MARIADB = ("127.0.0.1", 3306)
JOB_NAME = "hangdesk-lab"


class SlurmLabError(RuntimeError):
    pass


@dataclass
class SlurmSetup:
    root: Path
    lid: str
    conf: Path
    munge_socket: Path
    ctld_port: int
    dbd_port: int | None
    node_ports: dict[str, int]
    login: str  # the login node's name (sshd only: where the console runs scontrol)

    @property
    def env(self) -> dict:
        return {"SLURM_CONF": str(self.conf)}


def preflight() -> list[str]:
    missing = [path for path in DAEMONS.values() if not Path(path).exists()]
    missing += [tool for tool in CLIENTS if not shutil.which(tool)]
    return [f"{', '.join(missing)} ({PACKAGES})"] if missing else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mariadb_up() -> bool:
    try:
        with socket.create_connection(MARIADB, timeout=1):
            return True
    except OSError:
        return False


def prepare(state_dir: Path, lid: str, nodes: dict[str, str], login: str) -> SlurmSetup:
    """Write the configuration for `nodes` (name -> address); start nothing."""
    root = state_dir / "slurm"
    if root.exists():
        shutil.rmtree(root)
    for sub in ("etc", "munge", "ctld", "log", *(f"spool/{n}" for n in nodes)):
        (root / sub).mkdir(parents=True)
    key = root / "etc" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    munge_socket = root / "munge" / "munge.socket"
    if len(str(munge_socket)) > 100:  # sun_path holds 108 bytes
        raise SlurmLabError(f"the state dir's path is too long for a Unix socket: {root}")
    setup = SlurmSetup(
        root=root,
        lid=lid,
        conf=root / "etc" / "slurm.conf",
        munge_socket=munge_socket,
        ctld_port=_free_port(),
        dbd_port=_free_port() if _mariadb_up() else None,
        node_ports={name: _free_port() for name in nodes},
        login=login,
    )
    setup.conf.write_text(_slurm_conf(setup, nodes))
    if setup.dbd_port:
        dbd = root / "etc" / "slurmdbd.conf"
        dbd.write_text(_slurmdbd_conf(setup))
        dbd.chmod(0o600)  # slurmdbd refuses a configuration others can read
    return setup


def _slurm_conf(setup: SlurmSetup, nodes: dict[str, str]) -> str:
    r = setup.root
    lines = [
        f"ClusterName=hdlab{setup.lid}",
        # slurmctld only runs where the host name matches; it runs on this machine.
        f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
        f"SlurmctldPort={setup.ctld_port}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={setup.munge_socket}",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={r}/ctld",
        f"SlurmdSpoolDir={r}/spool/%n",
        f"SlurmctldPidFile={r}/ctld/slurmctld.pid",
        f"SlurmdPidFile={r}/spool/%n/slurmd.pid",
        f"SlurmctldLogFile={r}/log/slurmctld.log",
        f"SlurmdLogFile={r}/log/slurmd-%n.log",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        # The lab's nodes share one machine: trust the configured sizes, not the hardware.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        "JobCompType=jobcomp/none",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=30",
        "MinJobAge=600",
        "KillOnBadExit=0",
    ]
    if setup.dbd_port:
        lines += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={setup.dbd_port}",
            f"AccountingStoragePass={setup.munge_socket}",
            "JobAcctGatherType=jobacct_gather/linux",
            "JobAcctGatherFrequency=5",
        ]
    else:
        lines += ["AccountingStorageType=accounting_storage/none"]
    for name, address in nodes.items():
        lines.append(
            f"NodeName={name} NodeAddr={address} NodeHostname={name} "
            f"Port={setup.node_ports[name]} CPUs=8 RealMemory=8000 State=UNKNOWN"
        )
    lines.append("PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _slurmdbd_conf(setup: SlurmSetup) -> str:
    r = setup.root
    return (
        "\n".join(
            [
                "AuthType=auth/munge",
                f"AuthInfo=socket={setup.munge_socket}",
                "DbdHost=localhost",
                "DbdAddr=127.0.0.1",
                f"DbdPort={setup.dbd_port}",
                "SlurmUser=root",
                f"PidFile={r}/ctld/slurmdbd.pid",
                f"LogFile={r}/log/slurmdbd.log",
                "StorageType=accounting_storage/mysql",
                f"StorageHost={MARIADB[0]}",
                f"StoragePort={MARIADB[1]}",
                "StorageUser=root",
                f"StorageLoc={database(setup.lid)}",
            ]
        )
        + "\n"
    )


def database(lid: str) -> str:
    return f"hdlab_{lid}_acct"


def node_config(setup: SlurmSetup, name: str) -> dict:
    """What a lab node's PID 1 adds under Slurm: /etc/slurm, and its slurmd."""
    return {
        "binds": [[str(setup.root / "etc"), "/etc/slurm"]],
        "daemons": [[DAEMONS["slurmd"], "-D", "-N", name]],
        "holder_socket": "/var/log/train/.holder.sock",
    }


def _spawn(argv: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, **(env or {})},
        )  # fmt: skip


def start_services(setup: SlurmSetup, record) -> None:
    """munged, slurmdbd, slurmctld; `record(name, pid)` writes each pid to the lab's state
    before the next starts."""
    r = setup.root
    munged = _spawn(
        [DAEMONS["munged"], "-F", "-f", f"--key-file={r}/etc/munge.key",
         f"--socket={setup.munge_socket}", f"--pid-file={r}/munge/munged.pid",
         f"--seed-file={r}/munge/seed", f"--log-file={r}/log/munged.log", "--num-threads=4"],
        r / "log" / "munged.out",
    )  # fmt: skip
    record("munged", munged.pid)
    _wait(lambda: setup.munge_socket.exists(), 10, "munged's socket", munged)
    if setup.dbd_port:
        dbd = _spawn([DAEMONS["slurmdbd"], "-D"], r / "log" / "slurmdbd.out", setup.env)
        record("slurmdbd", dbd.pid)
        _wait(lambda: _listening(setup.dbd_port), 30, "slurmdbd", dbd)
    ctld = _spawn([DAEMONS["slurmctld"], "-D", "-i"], r / "log" / "slurmctld.out", setup.env)
    record("slurmctld", ctld.pid)
    _wait(lambda: _listening(setup.ctld_port), 30, "slurmctld", ctld)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _wait(ready, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc is not None and proc.poll() is not None:
            raise SlurmLabError(f"{what} exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise SlurmLabError(f"{what} not ready after {timeout:.0f} s")
        time.sleep(0.2)


def client(setup: SlurmSetup, *args: str, timeout: float = 20) -> str:
    """A Slurm client command on the host (sinfo, sbatch, ...): its stdout."""
    done = subprocess.run(
        list(args), capture_output=True, text=True, timeout=timeout,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **setup.env},
    )  # fmt: skip
    if done.returncode:
        raise SlurmLabError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def wait_nodes_idle(setup: SlurmSetup, names: list[str], timeout: float = 60) -> None:
    def idle() -> bool:
        try:
            out = client(setup, "sinfo", "-h", "-N", "-o", "%N %t")
        except (SlurmLabError, subprocess.TimeoutExpired):
            return False
        states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
        return all(states.get(name) == "idle" for name in names)

    _wait(idle, timeout, f"slurmd on {', '.join(names)} (sinfo: idle)")


def submit(setup: SlurmSetup, *, nodes: int, ranks_per_node: int, ranks: list[dict],
           base_env: dict, workdir: Path) -> str:  # fmt: skip
    """sbatch the lab's training job; returns its job id."""
    table = setup.root / "ranks.json"
    table.write_text(json.dumps({str(r["rank"]): r for r in ranks}, indent=2))
    script = setup.root / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        "# The lab's training job: one task per rank, srun's own lines labelled by task.\n"
        f"exec srun --label --kill-on-bad-exit=0 {sys.executable} {TASK_SCRIPT} {table}\n"
    )
    script.chmod(0o755)
    env = {**base_env, **setup.env}
    done = subprocess.run(
        ["sbatch", "--parsable", "-J", JOB_NAME, "-N", str(nodes),
         "--ntasks-per-node", str(ranks_per_node), "-o", "/var/log/train/slurm-%j.out",
         "-D", str(workdir), str(script)],
        capture_output=True, text=True, timeout=30, env=env,
    )  # fmt: skip
    if done.returncode:
        raise SlurmLabError(f"sbatch: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def stop(state: dict, timeout: float = 10.0) -> list[str]:
    """Stop the daemons the lab recorded (slurmctld, slurmdbd, munged), by pid; drop the
    accounting database. The slurmds die with their nodes."""
    slurm = state.get("slurm") or {}
    pids = slurm.get("pids", {})
    problems = []
    for name in ("slurmctld", "slurmdbd", "munged"):
        pid = pids.get(name)
        if not _ours(pid, name):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout / 3
        while _ours(pid, name) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            time.sleep(0.1)
        if _ours(pid, name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for name, pid in pids.items():
        if _ours(pid, name):
            problems.append(f"{name} (pid {pid}) still alive")
    if slurm.get("database"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                ["mariadb", "-uroot", f"-h{MARIADB[0]}", f"-P{MARIADB[1]}",
                 "-e", f"DROP DATABASE IF EXISTS {slurm['database']}"],
                capture_output=True, timeout=20,
            )  # fmt: skip
    return problems


def _ours(pid: int | None, name: str) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z" and name in cmdline


def task_extras(cfg: dict, extras: dict) -> dict:
    """What lab/slurm_task.py needs beside a rank's own settings."""
    return {"base_env": cfg["base_env"], "workdir": cfg["workdir"], **extras}


def start(state_dir: Path, state: dict, nodes: dict[str, str], login: str, save) -> SlurmSetup:
    """Configure and start the daemons, each pid in `state["slurm"]` (saved) as it exists."""
    setup = prepare(state_dir, state["lab_id"], nodes, login)
    pids: dict[str, int] = {}
    state["slurm"] = {"pids": pids, "conf": str(setup.conf)}
    if setup.dbd_port:
        state["slurm"]["database"] = database(setup.lid)

    def record(name: str, pid: int) -> None:
        pids[name] = pid
        save()

    start_services(setup, record)
    return setup


def submit_lab_job(opts, setup, ranks, node_json, login, client_key, *, base_env, workdir,
                   save, state) -> None:  # fmt: skip
    """Once every slurmd is idle: sbatch the job, and say in the node JSON how the console
    reaches this Slurm (the login node) and which job to ask for."""
    compute = [n["name"] for n in node_json["nodes"]]
    wait_nodes_idle(setup, compute)
    job_id = submit(
        setup, nodes=opts.nodes, ranks_per_node=opts.ranks_per_node, ranks=ranks,
        base_env=base_env, workdir=workdir,
    )  # fmt: skip
    state["slurm"]["job_id"] = job_id
    save()
    node_json["cluster"].update(
        source="slurm",
        controller_address=login["address"],
        controller_port=login["port"],
        controller_username="root",
        controller_key_path=str(client_key),
        controller_host_key=login["host_key"],
        node_port=opts.port,
        node_username="root",
        node_key_path=str(client_key),
        known_hosts_path=node_json["known_hosts"],
    )
    node_json["slurm"] = {
        "job_id": job_id,
        "conf": str(setup.conf),
        "login": login,
        "stdout": f"/var/log/train/slurm-{job_id}.out",
        "accounting": bool(setup.dbd_port),
    }
