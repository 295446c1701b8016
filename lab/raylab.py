"""Real Ray for the lab (`python -m lab up --ray`): Ray 2.60 from PyPI in its own virtualenv
(lab/rayenv.py), a head on lab-node-0 and `ray start --address` on the other nodes, and a
Ray Train `TorchTrainer` (CPU, gloo) running the scenario (lab/ray_train.py), submitted with
`ray job submit`, so the ranks are Ray Train worker actors in their nodes' process tables.

Everything stays on loopback, by construction: Ray 2.60's C++ servers (GCS, raylet, every core
worker) and a few Python ones bind the wildcard address whatever --node-ip-address says (and
with 127.0.0.1 as node address some resolve "localhost" to the machine's own address), so
every Ray process runs in a network namespace of the lab's own whose only interface is `lo`
(lab/ray_netns.py): a wildcard there is 127.0.0.0/8 and ::1, and nothing there can reach any
other address. Every port is pinned anyway (the namespace is private, so the numbers are
fixed; never 6379). The nodes' SSH stays on the node addresses in the machine's namespace:
each node's PID 1 accepts there and runs `sshd -i` for the connection inside the lab's
namespace, so a session on the head reaches Ray like one on a real head. `check_sockets`
proves all of it with `ss` and `ip` before the job is submitted; the node JSON keeps the
proof (`ray.sockets`).

Each node's Ray temp dir is its own directory bind-mounted on /tmp/ray (Ray's default), so
`/tmp/ray/session_latest/logs` on a node is that node's, as on a real cluster.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lab import rayenv

REPO = Path(__file__).resolve().parent.parent
TEMP_DIR = "/tmp/ray"
HOLDER_SOCKET = "/var/log/train/.holder.sock"
SCENARIOS = ("healthy", "rank-exit", "dataloader-stall", "collective-mismatch")
TOOLS = {"ip": "iproute2", "ss": "iproute2", "nsenter": "util-linux"}
# Inside the lab's own network namespace: fixed numbers, nothing else listens there.
HEAD_PORTS = {
    "gcs": 30001,
    "dashboard": 30002,
    "client_server": 30003,
    "autoscaler_metrics": 30004,
    "dashboard_metrics": 30005,
}
NODE_PORT_BASE = 31000  # node i: 31000 + 100 i + offset, its workers' ports from +20 to +99
OBJECT_STORE_BYTES = 80 * 1000 * 1000
# Ray Train's controller polls its workers this often: an hour, so a worker's death (or a
# hang) stays as it is while the console looks at it (Ray Train would tear the worker group
# down within 2 s otherwise: the lab's stand-in for a job nobody has noticed yet).
HEALTH_CHECK_INTERVAL_S = 3600
_WORKER_GROUP = re.compile(
    r"\(ip=([\d.]+), pid=(\d+)\) world_rank=(\d+), local_rank=(\d+), node_rank=(\d+)"
)


class RayLabError(RuntimeError):
    pass


@dataclass
class RaySetup:
    root: Path  # <state-dir>/ray: the job's storage, the socket report
    netns_pid: int  # lab.ray_netns, in the lab's network namespace
    netns_fd: int  # that namespace, open here until every node's PID 1 has inherited it
    nodes: dict[str, str]  # name -> address, the head first

    @property
    def head(self) -> str:
        return next(iter(self.nodes.values()))

    @property
    def dashboard(self) -> str:
        return f"http://{self.head}:{HEAD_PORTS['dashboard']}"

    def enter(self) -> list[str]:
        return ["nsenter", f"--net=/proc/{self.netns_pid}/ns/net", "--"]


def preflight() -> list[str]:
    import shutil

    missing = [f"{tool} ({package})" for tool, package in TOOLS.items() if not shutil.which(tool)]
    return missing


def node_ports(index: int) -> dict[str, int]:
    base = NODE_PORT_BASE + 100 * index
    return {
        "object_manager": base + 1,
        "node_manager": base + 2,
        "agent_listen": base + 3,
        "agent_grpc": base + 4,
        "runtime_env_agent": base + 5,
        "metrics_export": base + 6,
        "min_worker": base + 20,
        "max_worker": base + 99,
    }


def ray_env() -> dict[str, str]:
    """The environment of every Ray process of the lab (and of its CLI calls)."""
    return {
        "PATH": f"{rayenv.venv_dir() / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
        "/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "RAY_USAGE_STATS_ENABLED": "0",  # no report to Ray's servers
        "AUTOSCALER_METRIC_PORT": str(HEAD_PORTS["autoscaler_metrics"]),
        "DASHBOARD_METRIC_PORT": str(HEAD_PORTS["dashboard_metrics"]),
    }


def start(state_dir: Path, state: dict, nodes: dict[str, str], save) -> RaySetup:
    """The Ray venv (built on first use) and the lab's network namespace; Ray itself starts
    inside the nodes (node_config)."""
    try:
        rayenv.ensure(log=lambda text: print(text, file=sys.stderr))
    except rayenv.RayEnvError as exc:
        raise RayLabError(str(exc)) from exc
    root = state_dir / "ray"
    root.mkdir(exist_ok=True)
    keeper = subprocess.Popen(
        ["unshare", "--net", sys.executable, "-m", "lab.ray_netns"], cwd=REPO,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, env={**ray_env(), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    state["ray"] = {"netns_pid": keeper.pid}
    save()
    said = keeper.stdout.readline().decode(errors="replace").strip() if keeper.stdout else ""
    if said != "up":
        raise RayLabError(f"the lab's network namespace did not come up: {said or 'no answer'}")
    fd = os.open(f"/proc/{keeper.pid}/ns/net", os.O_RDONLY)
    return RaySetup(root=root, netns_pid=keeper.pid, netns_fd=fd, nodes=dict(nodes))


def node_config(setup: RaySetup, name: str, node_dir: Path, cpus: int, ssh_port: int) -> dict:
    """What a lab node's PID 1 adds under Ray: /tmp/ray its own, SSH served in the lab's
    namespace, and its `ray start` (the head's on the first node)."""
    index = list(setup.nodes).index(name)
    address = setup.nodes[name]
    ports = node_ports(index)
    (node_dir / "ray").mkdir()
    argv = [
        "nsenter", f"--net=/proc/self/fd/{setup.netns_fd}", "--",
        str(rayenv.ray_cli()), "start", "--block",
        f"--node-ip-address={address}",
        f"--object-manager-port={ports['object_manager']}",
        f"--node-manager-port={ports['node_manager']}",
        f"--dashboard-agent-listen-port={ports['agent_listen']}",
        f"--dashboard-agent-grpc-port={ports['agent_grpc']}",
        f"--runtime-env-agent-port={ports['runtime_env_agent']}",
        f"--metrics-export-port={ports['metrics_export']}",
        f"--min-worker-port={ports['min_worker']}",
        f"--max-worker-port={ports['max_worker']}",
        f"--temp-dir={TEMP_DIR}", f"--num-cpus={cpus}", "--num-gpus=0",
        f"--object-store-memory={OBJECT_STORE_BYTES}", "--disable-usage-stats",
        "--log-style=record", "--log-color=false",
    ]  # fmt: skip
    if index == 0:
        argv += [
            "--head",
            f"--port={HEAD_PORTS['gcs']}",
            "--include-dashboard=true",
            f"--dashboard-host={address}",
            f"--dashboard-port={HEAD_PORTS['dashboard']}",
            f"--ray-client-server-port={HEAD_PORTS['client_server']}",
        ]
    else:
        argv.append(f"--address={setup.head}:{HEAD_PORTS['gcs']}")
    return {
        "binds": [[str(node_dir / "ray"), TEMP_DIR]],
        "daemons": [argv],
        "daemon_env": ray_env(),
        "holder_socket": HOLDER_SOCKET,
        "netns_fd": setup.netns_fd,
        "ssh_listen": [address, ssh_port],
    }


def release(setup: RaySetup) -> None:
    """Every node's PID 1 holds the namespace now: close this process's copy."""
    with contextlib.suppress(OSError):
        os.close(setup.netns_fd)


def cli(setup: RaySetup, *args: str, timeout: float = 60) -> str:
    """Ray's CLI (the lab's venv), run inside the lab's namespace; its output, or RayLabError."""
    done = subprocess.run(
        [*setup.enter(), str(rayenv.ray_cli()), *args], capture_output=True, text=True,
        timeout=timeout, env=ray_env(), cwd=setup.root,
    )  # fmt: skip
    if done.returncode != 0:
        raise RayLabError(f"ray {' '.join(args[:3])}: {(done.stderr or done.stdout)[-1500:]}")
    return done.stdout


def wait_cluster(setup: RaySetup, state_dir: Path, timeout: float = 240) -> None:
    """Until every node's `ray start` says the runtime started and the GCS counts them all."""
    deadline = time.monotonic() + timeout
    outputs = [state_dir / "nodes" / name / "node.out" for name in setup.nodes]
    while not all(p.exists() and "Ray runtime started" in p.read_text(errors="replace")
                  for p in outputs):  # fmt: skip
        if time.monotonic() > deadline:
            raise RayLabError(f"Ray did not start within {timeout:.0f} s; see {outputs}")
        time.sleep(0.5)
    while True:
        status = cli(setup, "status", f"--address={setup.head}:{HEAD_PORTS['gcs']}")
        active = status.split("Active:", 1)[-1].split("Pending:", 1)[0]
        if active.count("node_") >= len(setup.nodes):
            return
        if time.monotonic() > deadline:
            raise RayLabError(f"Ray counts fewer than {len(setup.nodes)} nodes:\n{status}")
        time.sleep(1)


# ---------------------------------------------------------------- loopback, proven


def _loopback_or_wildcard(text: str) -> str | None:
    """'loopback', 'wildcard' or None for an address as `ss` prints it."""
    host = text.rsplit(":", 1)[0].strip("[]")
    host = host.split("%", 1)[0]
    if host in ("*", "0.0.0.0", "::"):  # noqa: S104 - a test of what ss printed
        return "wildcard"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return "loopback" if address.is_loopback else None


def check_sockets(setup: RaySetup, init_pids: list[int]) -> dict:
    """`ss -ltnup` and `ip addr` inside the lab's namespace: its only interface is lo, every
    socket listens on 127.0.0.0/8 or ::1 (or the wildcard, which there means the same); and
    no process of the lab's nodes but their PID 1 (which holds the SSH address) lives in the
    machine's namespace. The report, or RayLabError saying what broke the rule."""
    run = [*setup.enter()]
    addrs = subprocess.run(
        [*run, "ip", "-o", "addr"], capture_output=True, text=True, timeout=20, check=True
    ).stdout  # fmt: skip
    interfaces = sorted({line.split()[1] for line in addrs.splitlines() if line.strip()})
    listed = subprocess.run(
        [*run, "ss", "-H", "-ltnup"], capture_output=True, text=True, timeout=20, check=True
    ).stdout  # fmt: skip
    sockets, problems = [], []
    for line in listed.splitlines():
        cells = line.split()
        if len(cells) < 5:
            continue
        local, process = cells[4], " ".join(cells[6:])[:200]
        kind = _loopback_or_wildcard(local)
        sockets.append({"proto": cells[0], "address": local, "kind": kind, "process": process})
        if kind is None:
            problems.append(f"{local} ({process})")
    if interfaces != ["lo"]:
        problems.append(f"the namespace has interfaces {interfaces}, not only lo")
    outside = _outside_the_namespace(setup, init_pids)
    problems += [f"pid {pid} ({what}) is outside the lab's namespace" for pid, what in outside]
    if problems:
        raise RayLabError("Ray is not confined to loopback: " + "; ".join(problems[:10]))
    return {"interfaces": interfaces, "listening": sockets, "outside": []}


def _outside_the_namespace(setup: RaySetup, init_pids: list[int]) -> list[tuple[int, str]]:
    ours = os.readlink(f"/proc/{setup.netns_pid}/ns/net")
    found = []
    for init in init_pids:
        for pid in _descendants(init):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/ns/net") != ours:
                    found.append((pid, Path(f"/proc/{pid}/comm").read_text().strip()))
    return found


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            kids = [
                int(x) for x in Path(f"/proc/{current}/task/{current}/children").read_text().split()
            ]
            out += kids
            todo += kids
    return out


# ---------------------------------------------------------------- the job


def job_env(opts) -> dict[str, str]:
    """The runtime environment's variables of the lab's Ray job (driver, controller, workers)."""
    fr_prefix = "/var/log/train/fr/trace_rank_"
    return {
        "PYTHONPATH": f"{REPO / 'lab'}:{REPO}",
        "TRAIN_LOG_DIR": "/var/log/train",
        "HANGDESK_LAB_HOLDER_SOCKET": HOLDER_SOCKET,
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "lo",
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_FR_DUMP_TEMP_FILE": fr_prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": fr_prefix,
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": str(HEALTH_CHECK_INTERVAL_S),
        # One actor fewer to start (it watches for cloud preemption notices).
        "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    }


def submit(setup: RaySetup, opts, *, scenario: str, fault_rank: int, name: str) -> str:
    """`ray job submit` of lab/ray_train.py; the submission id (= the run name)."""
    world = opts.nodes * opts.ranks_per_node
    entrypoint = [
        str(rayenv.python()), str(REPO / "lab" / "ray_train.py"),
        "--scenario", scenario, "--world", str(world), "--fault-rank", str(fault_rank),
        "--fault-step", str(opts.fault_step), "--step-time", str(opts.step_time),
        "--watchdog-timeout", str(opts.watchdog_timeout), "--run-name", name,
        "--storage", str(setup.root / "storage"),
    ]  # fmt: skip
    cli(
        setup, "job", "submit", f"--address={setup.dashboard}", f"--submission-id={name}",
        "--no-wait", f"--runtime-env-json={json.dumps({'env_vars': job_env(opts)})}", "--",
        *entrypoint, timeout=120,
    )  # fmt: skip
    return name


def wait_ranks(state_dir: Path, world: int, timeout: float) -> None:
    """Until every rank logged its first step, on whichever node Ray placed it."""
    deadline = time.monotonic() + timeout
    while True:
        logs = {p.name: p for p in (state_dir / "nodes").glob("*/log/rank*.log")}
        pending = [
            r for r in range(world)
            if f"rank{r}.log" not in logs or " step=1 " not in logs[f"rank{r}.log"].read_text()
        ]  # fmt: skip
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RayLabError(f"Ray job not stepping after {timeout:.0f} s; ranks {pending}")
        time.sleep(0.5)


def session_logs(state_dir: Path, node: str) -> Path:
    """The node's current Ray session log dir, seen from the host (session_latest is a link
    to /tmp/ray/session_..., a path inside the node)."""
    temp = state_dir / "nodes" / node / "ray"
    return temp / Path(os.readlink(temp / "session_latest")).name / "logs"


def worker_group(state_dir: Path, head: str) -> dict[int, dict]:
    """rank -> {ip, pid, local_rank, node_rank}, from the controller's `Started training
    worker group` line in the head's Ray Train log (the latest group wins)."""
    logs = session_logs(state_dir, head) / "train"
    found: dict[int, dict] = {}
    for path in sorted(logs.glob("ray-train-sys-controller-*.log"), key=os.path.getmtime):
        for line in path.read_text(errors="replace").splitlines():
            if "Started training worker group" not in line:
                continue
            message = json.loads(line).get("message", "")
            found = {
                int(m.group(3)): {
                    "ip": m.group(1),
                    "pid": int(m.group(2)),
                    "local_rank": int(m.group(4)),
                    "node_rank": int(m.group(5)),
                }
                for m in _WORKER_GROUP.finditer(message)
            }
    return found


def stop(state: dict, timeout: float = 10.0) -> list[str]:
    """The namespace's keeper, by pid (Ray itself died with the nodes' PID 1)."""
    pid = (state.get("ray") or {}).get("netns_pid")
    if not pid or not _ours(pid):
        return []
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _ours(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
    return [f"ray netns keeper pid {pid} still alive"] if _ours(pid) else []


def _ours(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"lab.ray_netns" in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z"


def launch(opts, setup: RaySetup, node_json: dict, state_dir: Path, state: dict, save,
           *, head_login: dict, client_key: Path) -> None:  # fmt: skip
    """Once every node runs: Ray up on all of them, loopback proven, the job submitted and
    stepping; the node JSON says how the console reaches the head and which job to ask for."""
    started = time.monotonic()
    wait_cluster(setup, state_dir)
    state["ray"]["up_seconds"] = round(time.monotonic() - started, 1)
    inits = [n["init_pid"] for n in state["nodes"] if n.get("init_pid")]
    state["ray"]["sockets"] = sockets = check_sockets(setup, inits)
    save()
    from lab import scenarios

    fault = scenarios.fault_rank(opts.scenario, opts.nodes, opts.ranks_per_node)
    name = submit(setup, opts, scenario=opts.scenario, fault_rank=fault, name="hdlab-job")
    state["ray"]["submission_id"] = name
    save()
    wait_ranks(state_dir, opts.nodes * opts.ranks_per_node, opts.ready_timeout)
    by_address = {address: node for node, address in setup.nodes.items()}
    workers = {
        rank: {**w, "node": by_address.get(w["ip"], w["ip"])}
        for rank, w in worker_group(state_dir, next(iter(setup.nodes))).items()
    }
    node_json["cluster"].update(
        name="lab-ray",
        source="ray",
        controller_address=head_login["address"],
        controller_port=head_login["port"],
        controller_username="root",
        controller_key_path=str(client_key),
        controller_host_key=head_login["host_key"],
        node_port=opts.port,
        node_username="root",
        node_key_path=str(client_key),
        known_hosts_path=node_json["known_hosts"],
        ray_command=str(rayenv.ray_cli()),
    )
    node_json["ray"] = {
        "submission_id": name,
        "run_name": name,
        "head": setup.head,
        "dashboard": setup.dashboard,
        "gcs": f"{setup.head}:{HEAD_PORTS['gcs']}",
        "netns_pid": setup.netns_pid,
        "up_seconds": state["ray"]["up_seconds"],
        "sockets": sockets,
        "workers": {str(rank): w for rank, w in sorted(workers.items())},
    }
    # Ray, not the lab, places the ranks: the suspect's node is where its worker runs.
    suspects = node_json["expected"].get("suspect_ranks") or []
    if suspects and suspects[0] in workers:
        node_json["expected"]["suspect_node"] = workers[suspects[0]]["node"]
