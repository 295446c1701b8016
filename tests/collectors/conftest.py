"""The collector tests' world: a real sshd on 127.0.0.1 and real (fake) training ranks.

One sshd and one set of ranks per test session, both stopped by pid at the end.
"""

from __future__ import annotations

import os
import pickle
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from clusters.sshspec import NodeTarget
from hangdesk.plan import CollectionPlan
from tests.helpers import free_port, wait_for

SSHD = "/usr/sbin/sshd"
PYSPY = Path(sys.executable).with_name("py-spy")
TRAIN_SCRIPT = Path(__file__).with_name("train.py")
HOSTILE_NODE = Path(__file__).with_name("hostile_node.sh")
WORLD_SIZE = 4
FLIGHT_RECORDER_DUMP = pickle.dumps(
    {"version": "2.4", "entries": [{"collective_seq_id": 7, "profiling_name": "gloo:all_reduce"}]}
) + bytes(range(256))
NON_UTF8_LOG = b"launcher started\nNCCL WARN bad byte \xff\xfe here\nlast line\n"


@dataclass
class Keypair:
    private: Path
    public_line: str  # "ssh-ed25519 AAAA... comment"


def keygen(path: Path, kind: str = "ed25519") -> Keypair:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "hangdesk-test", "-f", str(path)],
        check=True,
        timeout=30,
    )
    return Keypair(path, path.with_suffix(".pub").read_text().strip())


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@dataclass
class Sshd:
    port: int
    host_key: Keypair
    client_key: Keypair
    log_path: Path
    # A second port where sshd runs hostile_node.sh instead of the probe.
    hostile_port: int
    behaviour_file: Path

    def target(self, **overrides) -> NodeTarget:
        target = NodeTarget(
            name="node-under-test",
            address="127.0.0.1",
            port=self.port,
            username="root",
            key_path=str(self.client_key.private),
            host_key=self.host_key.public_line,
        )
        return replace(target, **overrides)

    def hostile_target(self, behaviour: str) -> NodeTarget:
        self.behaviour_file.write_text(behaviour)
        return self.target(name="hostile-node", port=self.hostile_port)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def _sshd_config(directory: Path, port: int, hostile_port: int) -> Path:
    config = directory / "sshd_config"
    config.write_text(
        f"""\
Port {port}
Port {hostile_port}
ListenAddress 127.0.0.1
HostKey {directory / "host_ed25519"}
PidFile {directory / "sshd.pid"}
AuthorizedKeysFile {directory / "authorized_keys"}
PermitRootLogin prohibit-password
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
LogLevel VERBOSE
Match LocalPort {hostile_port}
    ForceCommand /bin/sh {HOSTILE_NODE} {directory / "behaviour"}
"""
    )
    return config


@pytest.fixture(scope="session")
def sshd(tmp_path_factory) -> Sshd:
    """A real OpenSSH server accepting only our generated client key, for root."""
    if not os.path.exists(SSHD):
        pytest.fail(f"{SSHD} is required for the collector tests")
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
    directory = tmp_path_factory.mktemp("sshd")
    host_key = keygen(directory / "host_ed25519")
    client_key = keygen(directory / "client_ed25519")
    (directory / "authorized_keys").write_text(client_key.public_line + "\n")
    log_path = directory / "sshd.log"
    for _attempt in range(3):
        port, hostile_port = free_port(), free_port()
        while hostile_port == port:
            hostile_port = free_port()
        config = _sshd_config(directory, port, hostile_port)
        with open(log_path, "ab") as log:
            since = log.tell()  # this attempt's lines only
            process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        if _wait_listening(log_path, since, (port, hostile_port), process):
            break
        stop(process)
    else:
        pytest.fail(f"sshd did not start: {log_path.read_text()}")
    yield Sshd(port, host_key, client_key, log_path, hostile_port, directory / "behaviour")
    stop(process)


def _wait_listening(log_path: Path, since: int, ports, process: subprocess.Popen) -> bool:
    """Until this sshd says it listens on every port (sshd -e logs `Server listening on
    127.0.0.1 port N.` once bound): a connect alone could reach another process's sshd that
    took a port between choosing it and binding it. False when it cannot bind and exits."""
    wanted = {f"Server listening on 127.0.0.1 port {port}.".encode() for port in ports}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        with open(log_path, "rb") as log:
            log.seek(since)
            text = log.read()
        if all(line in text for line in wanted):
            return True
        if b"Bind to port" in text:  # `... failed: Address already in use.`: try other ports
            return False
        time.sleep(0.05)
    return False


@dataclass
class Ranks:
    """Fake training ranks plus one matching non-Python process (py-spy must fail on it)."""

    pattern: str
    log_dir: Path
    fr_dir: Path
    pids: list[int]  # python ranks, index = RANK
    not_python_pid: int

    def plan(self, **overrides) -> CollectionPlan:
        plan = dict(
            process_pattern=self.pattern,
            log_globs=[f"{self.log_dir}/*.log"],
            flight_recorder_globs=[f"{self.fr_dir}/*"],
            pyspy_command=str(PYSPY),
            command_timeout_s=10,
            total_timeout_s=30,
            connect_timeout_s=5,
        )
        return CollectionPlan(**{**plan, **overrides})


@pytest.fixture(scope="session")
def ranks(tmp_path_factory) -> Ranks:
    token = f"hdtest{secrets.token_hex(4)}"
    base = tmp_path_factory.mktemp("train")
    log_dir, fr_dir = base / "logs", base / "fr"
    log_dir.mkdir()
    fr_dir.mkdir()
    # Binary artifacts that must survive the trip untouched.
    (fr_dir / "trace_rank_0").write_bytes(FLIGHT_RECORDER_DUMP)
    (log_dir / "launcher.log").write_bytes(NON_UTF8_LOG)
    processes = []
    for rank in range(WORLD_SIZE):
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(WORLD_SIZE),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
            "NCCL_SOCKET_IFNAME": "lo",
            # A value that is not UTF-8 must come back byte for byte.
            b"HD_RAW_BYTES": b"\xff\xfe\x80raw",
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, str(TRAIN_SCRIPT), "--job", token, "--log-dir", str(log_dir)],
                env=env,
                stdin=subprocess.DEVNULL,
            )
        )
    not_python = subprocess.Popen(
        ["bash", "-c", f'exec -a "notpython train.py --job {token}" sleep 600'],
        stdin=subprocess.DEVNULL,
    )
    processes.append(not_python)
    try:
        for rank in range(WORLD_SIZE):
            wait_for(
                lambda rank=rank: "step=3" in _read(log_dir / f"rank{rank}.log"),
                timeout=30,
                what=f"rank {rank} to start",
            )
        yield Ranks(
            pattern=f"train[.]py --job {token}",
            log_dir=log_dir,
            fr_dir=fr_dir,
            pids=[p.pid for p in processes[:WORLD_SIZE]],
            not_python_pid=not_python.pid,
        )
    finally:
        for process in processes:
            stop(process)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def pyspy_call_starts(directory: Path) -> list[tuple[float, int]]:
    """(start time, pid asked for) of each call of a py-spy stand-in that appends
    `$(date +%s.%N) $*` to `directory/starts`, in start order: calls side by side start
    together, calls one after another start a call's length apart, whatever the load."""
    calls = []
    for line in (directory / "starts").read_text().splitlines():
        stamp, *args = line.split()
        pid = args[args.index("--pid") + 1] if "--pid" in args else "-1"
        calls.append((float(stamp), int(pid)))
    return sorted(calls)
