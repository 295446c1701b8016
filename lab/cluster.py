"""Bring a lab up, tear it down, report its status.

A lab lives in a state directory: lab-state.json (every pid, cgroup and address the lab
owns, written as soon as each thing exists, so `down` works after a crash), nodes.json (the
node list for the console), ssh/ (client key, known_hosts) and nodes/<name>/ (the node's
logs, flight-recorder dumps, ~/.bashrc, sshd config and host key).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zlib
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from lab import cgroups, raylab, scenarios, sshsetup
from lab import slurm as slurmlab
from lab.addresses import loopback_run

REPO = Path(__file__).resolve().parent.parent
TRAIN_SCRIPT = REPO / "lab" / "train.py"
LIGHT_SCRIPT = REPO / "lab" / "light_train.py"
SSHD = "/usr/sbin/sshd"
PROCESS_PATTERN = r"torchrun|pretrain_gpt|megatron|train\.py"
STEP_RE = re.compile(r"\[rank(\d+)\] host=(\S+) step=(\d+) ")


class LabError(RuntimeError):
    """The lab cannot run here, or could not come up; the message says what is needed."""


@dataclass
class LabOptions:
    nodes: int = 2
    ranks_per_node: int = 2
    scenario: str = "healthy"
    state_dir: Path = REPO / ".lab"
    base_address: str | None = None  # "127.S.T.U": node i gets U + i (carrying into T)
    port: int = 22
    master_port: int | None = None  # None: 29500, or the next free pair above it
    light: bool = False
    fault_step: int = 10
    step_time: float = 0.5
    watchdog_timeout: float = 10.0
    oom_limit_mb: int = 0  # 0: torch 700 MiB, light 60 MiB
    slurm: bool = False  # ranks started by real Slurm (lab/slurm.py), plus a login node
    ray: bool = False  # ranks are Ray Train workers of real Ray (lab/raylab.py)
    ready_timeout: float = 240.0


def default_state_dir() -> Path:
    return Path(os.environ.get("HANGDESK_LAB_DIR") or REPO / ".lab")


def lab_id(state_dir: Path) -> str:
    return f"{zlib.crc32(str(state_dir.resolve()).encode()):08x}"


def node_addresses(opts: LabOptions) -> list[str]:
    """One loopback address per node, skipping .0 and .255; the default second octet comes
    from the state dir so two labs (test + demo) do not collide."""
    if opts.base_address:
        a, b, c, d = (int(x) for x in opts.base_address.split("."))
    else:
        a, b, c, d = 127, 100 + zlib.crc32(str(opts.state_dir.resolve()).encode()) % 100, 1, 1
    out = loopback_run((a, b, c, d), opts.nodes)
    if out is None:
        raise LabError(f"bad address range from {opts.base_address}: need 127.x.y.z, room left")
    return out


def preflight(light: bool) -> list[str]:
    """What is missing for the lab to run here (empty list: it can run)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (PID/UTS/mount namespaces, bind mounts, sshd, memory cgroups)")
    for tool in (SSHD, "ssh-keygen", "unshare", "mount"):
        if not (Path(tool).exists() if tool.startswith("/") else shutil.which(tool)):
            missing.append(f"{tool} (apt-get install openssh-server util-linux)")
    if not light:
        try:
            subprocess.run(
                [sys.executable, "-c", "import torch.distributed"],
                check=True,
                capture_output=True,
                timeout=60,
            )
        except (subprocess.SubprocessError, OSError):
            missing.append("torch in this Python (pip install torch==2.13.0), or use --light")
    return missing


def pyspy_path() -> str:
    found = Path(sys.executable).parent / "py-spy"
    return str(found) if found.exists() else (shutil.which("py-spy") or "py-spy")


# ---------------------------------------------------------------- state file


def _state_path(state_dir: Path) -> Path:
    return state_dir / "lab-state.json"


def _save_state(state_dir: Path, state: dict) -> None:
    tmp = _state_path(state_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(_state_path(state_dir))


def load_state(state_dir: Path) -> dict | None:
    path = _state_path(state_dir)
    return json.loads(path.read_text()) if path.exists() else None


# ---------------------------------------------------------------- up


def _check_free(address: str, port: int) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            raise LabError(
                f"{address}:{port} is taken ({exc}); another lab or service uses it. "
                "Pick another --base-address or --port, or run `python -m lab down`."
            ) from exc


def _pick_addresses(opts: LabOptions) -> list[str]:
    """The node addresses, checked free. Without --base-address, move to the next second
    octet when another lab (or service) already holds the derived range."""
    addresses = node_addresses(opts)
    for attempt in range(100):
        try:
            for addr in addresses:
                _check_free(addr, opts.port)
            return addresses
        except LabError:
            if opts.base_address or attempt == 99:
                raise
        second = 100 + (int(addresses[0].split(".")[1]) - 99) % 100
        addresses = node_addresses(
            LabOptions(nodes=opts.nodes, base_address=f"127.{second}.1.1", state_dir=opts.state_dir)
        )
    return addresses


DEFAULT_MASTER_PORT = 29500


def _pick_master_port(opts: LabOptions) -> int:
    """The rendezvous port and the one above it (init-hang's wrong port) must be free on every
    address: torch's TCPStore binds *:MASTER_PORT, so two labs with one port collide whatever
    their node addresses. Without --master-port, the first free pair from 29500 up."""
    candidates = [opts.master_port] if opts.master_port else range(DEFAULT_MASTER_PORT, 30500, 2)
    for port in candidates:
        try:
            _check_free("0.0.0.0", port)  # noqa: S104 - a probe bind, closed at once
            _check_free("0.0.0.0", port + 1)  # noqa: S104
            return port
        except LabError:
            if opts.master_port:
                raise
    raise LabError("no free rendezvous port pair between 29500 and 30500")


def _rank_env(opts: LabOptions, addresses: list[str], node: int, local: int) -> dict:
    world = opts.nodes * opts.ranks_per_node
    rank = node * opts.ranks_per_node + local
    master_port = opts.master_port
    if opts.scenario == "init-hang" and node == scenarios.fault_node("init-hang", opts.nodes):
        master_port += 1  # the mistake of this scenario
    # env-drift: every rank starts from the cluster value; the drifted node's ~/.bashrc
    # overrides it when the rank starts (see lab/node.py).
    ifname = scenarios.CLUSTER_IFNAME
    fr_prefix = "/var/log/train/fr/trace_rank_"
    return {
        "RANK": str(rank),
        "LOCAL_RANK": str(local),
        "GROUP_RANK": str(node),
        "NODE_RANK": str(node),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(opts.ranks_per_node),
        "MASTER_ADDR": addresses[0],
        "MASTER_PORT": str(master_port),
        "CUDA_VISIBLE_DEVICES": str(local),
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": ifname,
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_IB_GID_INDEX": "3",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_FR_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": fr_prefix,
        "TORCH_FR_DUMP_TEMP_FILE": fr_prefix,
        "GLOO_SOCKET_IFNAME": "lo",
        "TRAIN_LOG_DIR": "/var/log/train",
    }


def _rank_argv(opts: LabOptions, start_at: float) -> list[str]:
    fault = scenarios.fault_rank(opts.scenario, opts.nodes, opts.ranks_per_node)
    script = LIGHT_SCRIPT if opts.light else TRAIN_SCRIPT
    argv = [
        sys.executable,
        str(script),
        "--scenario", opts.scenario,
        "--fault-rank", str(fault),
        "--fault-step", str(opts.fault_step),
        "--step-time", str(opts.step_time),
        "--watchdog-timeout", str(opts.watchdog_timeout),
    ]  # fmt: skip
    if opts.light:
        argv += ["--start-at", f"{start_at:.3f}"]
    return argv


def _base_env() -> dict:
    venv_bin = str(Path(sys.executable).parent)
    return {
        "PATH": f"{venv_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "USER": "root",
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONWARNINGS": "ignore",
        "OMP_NUM_THREADS": "1",
    }


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


def up(opts: LabOptions) -> dict:
    """Start the lab; returns the node JSON (also written to <state_dir>/nodes.json)."""
    if opts.scenario not in scenarios.SCENARIOS:
        raise LabError(f"unknown scenario {opts.scenario!r}; one of {sorted(scenarios.SCENARIOS)}")
    if opts.scenario in scenarios.GROUP_SCENARIOS and (
        opts.light or opts.nodes < 2 or opts.ranks_per_node < 2
    ):
        raise LabError(
            f"{opts.scenario} needs torch (not --light), at least 2 nodes and 2 ranks per node "
            "(tensor parallel inside a node, data parallel across nodes)"
        )
    _refuse_ray_combinations(opts)
    missing = preflight(opts.light) + (slurmlab.preflight() if opts.slurm else [])
    missing += raylab.preflight() if opts.ray else []
    if missing:
        raise LabError("the lab needs: " + "; ".join(missing))
    if opts.scenario == "oom" and not cgroups.available():
        raise LabError("the oom scenario needs a writable cgroup v1 memory hierarchy")
    state_dir = opts.state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if load_state(state_dir):
        down(state_dir)  # leftovers of an earlier run
    lid = lab_id(state_dir)
    cgroups.remove_all(lid)
    # Under Slurm one more address: the login node, where the console asks Slurm.
    addresses = _pick_addresses(replace(opts, nodes=opts.nodes + (1 if opts.slurm else 0)))
    opts = replace(opts, master_port=_pick_master_port(opts))

    started = time.monotonic()
    names = [f"lab-node-{i}" for i in range(opts.nodes)] + (["lab-login"] if opts.slurm else [])
    state = {
        "lab_id": lid,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(opts).items()},
        "nodes": [],
        "cgroups": [],
    }
    _save_state(state_dir, state)
    try:
        node_json = _start(opts, state_dir, state, names, addresses)
        _wait_ready(opts, state_dir, state, addresses)
    except BaseException:
        down(state_dir)
        raise
    state["ready_seconds"] = round(time.monotonic() - started, 1)
    _save_state(state_dir, state)
    node_json["ready_seconds"] = state["ready_seconds"]
    (state_dir / "nodes.json").write_text(json.dumps(node_json, indent=2))
    return node_json


def _refuse_ray_combinations(opts: LabOptions) -> None:
    if not opts.ray:
        return
    if opts.slurm or opts.light:
        raise LabError("--ray runs torch workers under Ray: not with --slurm or --light")
    if opts.scenario not in raylab.SCENARIOS:
        raise LabError(f"--ray runs the scenarios {', '.join(raylab.SCENARIOS)}")


def _start(opts, state_dir: Path, state: dict, names, addresses) -> dict:
    ssh_dir = state_dir / "ssh"
    ssh_dir.mkdir(exist_ok=True)
    client_key = ssh_dir / "id_ed25519"
    sshsetup.keygen(client_key, "hangdesk-console@lab")
    authorized = client_key.with_name("id_ed25519.pub")
    known_hosts: list[str] = []
    world = opts.nodes * opts.ranks_per_node
    fault = scenarios.fault_rank(opts.scenario, opts.nodes, opts.ranks_per_node)
    drift_node = scenarios.fault_node("env-drift", opts.nodes)
    start_at = time.time() + 2.0 + 0.1 * opts.nodes  # light ranks' shared clock
    limit_mb = opts.oom_limit_mb or (60 if opts.light else 700)
    nodes_out = []
    setup = _slurm_start(opts, state_dir, state, names, addresses) if opts.slurm else None
    ray_setup = _ray_start(opts, state_dir, state, names, addresses) if opts.ray else None
    slurm_ranks: list[dict] = []
    for i, (name, addr) in enumerate(zip(names, addresses, strict=True)):
        ndir = state_dir / "nodes" / name
        if ndir.exists():
            shutil.rmtree(ndir)
        (ndir / "log" / "fr").mkdir(parents=True)
        host_key = ndir / "ssh_host_ed25519_key"
        pub = sshsetup.keygen(host_key, f"root@{name}")
        known_hosts.append(sshsetup.known_hosts_line(addr, opts.port, pub))
        (ndir / "sshd_config").write_text(
            sshsetup.sshd_config(addr, opts.port, host_key, authorized, ndir / "sshd.pid")
        )
        drift = {}
        if opts.scenario == "env-drift" and i == drift_node:
            drift = {scenarios.DRIFT_VAR: scenarios.DRIFT_VALUE}
        (ndir / "bashrc").write_text(sshsetup.bashrc(drift))
        ranks = []
        for local in range(opts.ranks_per_node if i < opts.nodes else 0):
            rank = i * opts.ranks_per_node + local
            rank_cfg = {
                "rank": rank,
                "local_rank": local,
                "env": _rank_env(opts, addresses, i, local),
                "argv": _rank_argv(opts, start_at),
            }
            if opts.scenario == "oom" and rank == fault:
                cg = cgroups.create(state["lab_id"], f"{name}-rank{rank}", limit_mb << 20)
                state["cgroups"].append(str(cg))
                _save_state(state_dir, state)
                rank_cfg["cgroup"] = str(cg)
            ranks.append(rank_cfg)
        cfg = {
            "hostname": name,
            "log_dir": str(ndir / "log"),
            "bashrc": str(ndir / "bashrc"),
            "sshd": SSHD,
            "sshd_config": str(ndir / "sshd_config"),
            "workdir": str(REPO),
            "base_env": _base_env(),
            "ranks": ranks,
        }
        if setup is not None:  # Slurm starts the ranks; the node runs slurmd (not the login)
            extras = slurmlab.node_config(setup, name)
            slurm_ranks += [{**r, **slurmlab.task_extras(cfg, extras)} for r in ranks]
            cfg.update(ranks=[], binds=extras["binds"], holder_socket=extras["holder_socket"])
            cfg["daemons"] = extras["daemons"] if i < opts.nodes else []
        elif ray_setup is not None:  # Ray starts the ranks; the node runs `ray start`
            cfg.update(
                ranks=[],
                **raylab.node_config(ray_setup, name, ndir, opts.ranks_per_node, opts.port),
            )
        (ndir / "node.json").write_text(json.dumps(cfg, indent=2))
        out = open(ndir / "node.out", "ab")  # noqa: SIM115 -- handed to the child, closed below
        proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--uts", "--mount", "--mount-proc",
             "--propagation", "private", sys.executable, "-m", "lab.node", str(ndir / "node.json")],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**_base_env(), "PYTHONPATH": str(REPO)},
            pass_fds=(ray_setup.netns_fd,) if ray_setup else (),
        )  # fmt: skip
        out.close()
        entry = {"name": name, "address": addr, "unshare_pid": proc.pid, "init_pid": None}
        entry["login"] = i >= opts.nodes
        state["nodes"].append(entry)
        _save_state(state_dir, state)
        deadline = time.monotonic() + 10
        while not entry["init_pid"] and time.monotonic() < deadline:
            kids = _children(proc.pid)
            entry["init_pid"] = kids[0] if kids else None
            if proc.poll() is not None:
                raise LabError(f"{name}: unshare exited {proc.returncode}; see {ndir / 'node.out'}")
            time.sleep(0.05)
        _save_state(state_dir, state)
        if i >= opts.nodes:
            login = {"address": addr, "port": opts.port, "host_key": sshsetup.host_key_entry(pub)}
            continue
        nodes_out.append(
            {
                "name": name,
                "address": addr,
                "port": opts.port,
                "username": "root",
                "key_path": str(client_key),
                "host_key": sshsetup.host_key_entry(pub),
            }
        )
    (ssh_dir / "known_hosts").write_text("\n".join(known_hosts) + "\n")
    mode = "light" if opts.light else "torch"
    node_json = {
        "cluster": {
            "name": "lab",
            "description": f"hangdesk lab ({mode}): {opts.nodes} nodes x {opts.ranks_per_node} "
            f"ranks, scenario {opts.scenario}",
            "process_pattern": PROCESS_PATTERN,
            "world_size": world,
            "log_globs": ["/var/log/train/*.log"],
            "flight_recorder_globs": ["/var/log/train/fr/*"],
            "pyspy_command": pyspy_path(),
        },
        "nodes": nodes_out,
        "known_hosts": str(ssh_dir / "known_hosts"),
        "scenario": opts.scenario,
        "mode": mode,
        "state_dir": str(state_dir),
        "expected": scenarios.expected(
            opts.scenario, opts.nodes, opts.ranks_per_node, opts.fault_step, names[: opts.nodes]
        ),
    }
    if setup is not None:
        try:
            slurmlab.submit_lab_job(
                opts, setup, slurm_ranks, node_json, login, client_key, base_env=_base_env(),
                workdir=REPO, save=lambda: _save_state(state_dir, state), state=state,
            )  # fmt: skip
        except (slurmlab.SlurmLabError, subprocess.TimeoutExpired) as exc:
            raise LabError(f"Slurm: {exc}; see {setup.root / 'log'}") from exc
    if ray_setup is not None:
        raylab.release(ray_setup)
        head = {"address": addresses[0], "port": opts.port, "host_key": nodes_out[0]["host_key"]}
        try:
            raylab.launch(
                opts, ray_setup, node_json, state_dir, state, lambda: _save_state(state_dir, state),
                head_login=head, client_key=client_key,
            )  # fmt: skip
        except (raylab.RayLabError, subprocess.SubprocessError) as exc:
            raise LabError(f"Ray: {exc}; see {state_dir / 'nodes'}/*/node.out") from exc
    return node_json


def _slurm_start(opts, state_dir: Path, state: dict, names, addresses) -> slurmlab.SlurmSetup:
    nodes = dict(zip(names[: opts.nodes], addresses, strict=False))
    try:
        return slurmlab.start(
            state_dir, state, nodes, names[-1], lambda: _save_state(state_dir, state)
        )
    except slurmlab.SlurmLabError as exc:
        raise LabError(f"Slurm: {exc}; see {state_dir / 'slurm' / 'log'}") from exc


def _ray_start(opts, state_dir: Path, state: dict, names, addresses) -> raylab.RaySetup:
    try:
        return raylab.start(state_dir, state, dict(zip(names, addresses, strict=True)),
                            lambda: _save_state(state_dir, state))  # fmt: skip
    except raylab.RayLabError as exc:
        raise LabError(f"Ray: {exc}") from exc


def _port_open(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


def _wait_ready(opts: LabOptions, state_dir: Path, state: dict, addresses: list[str]) -> None:
    """Until every sshd answers and every rank has logged (a first step, or its start-up
    line in init-hang)."""
    deadline = time.monotonic() + opts.ready_timeout
    want = "starting pid=" if opts.scenario == "init-hang" else " step=1 "
    while True:
        pending = [a for a in addresses if not _port_open(a, opts.port)]
        for node in state["nodes"]:
            if node.get("login") and _alive(node["init_pid"]):
                continue
            if not _alive(node["init_pid"]):
                raise LabError(
                    f"{node['name']} died during start-up; see "
                    f"{state_dir / 'nodes' / node['name'] / 'node.out'}"
                )
            logdir = state_dir / "nodes" / node["name"] / "log"
            launcher = logdir / "launcher.log"
            died = launcher.exists() and " exited with exitcode " in launcher.read_text()
            if died and not opts.scenario.startswith(("rank-exit", "oom", "tp-rank-exit")):
                tail = launcher.read_text().strip().splitlines()[-1]
                raise LabError(
                    f"{node['name']}: a rank died during start-up ({tail}); see {logdir}"
                )
            for local in range(0 if opts.ray else opts.ranks_per_node):  # Ray: raylab waits
                rank = addresses.index(node["address"]) * opts.ranks_per_node + local
                log = logdir / f"rank{rank}.log"
                text = log.read_text(errors="replace") if log.exists() else ""
                if want not in text:
                    pending.append(f"rank{rank}")
        if not pending:
            return
        if time.monotonic() > deadline:
            raise LabError(f"lab not ready after {opts.ready_timeout:.0f} s; waiting on {pending}")
        time.sleep(0.5)


# ---------------------------------------------------------------- down / status


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ours(pid: int | None, marker: str) -> bool:
    """Guard against pid reuse: only signal a pid whose command line is what we started."""
    if not pid:
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def down(state_dir: Path, timeout: float = 10.0) -> list[str]:
    """Stop everything the lab started. Idempotent. Returns problems left over (empty = clean)."""
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    problems: list[str] = []
    if state is None:
        return problems
    inits = [n["init_pid"] for n in state["nodes"] if _ours(n.get("init_pid"), "lab.node")]
    for pid in inits:
        os.kill(pid, signal.SIGTERM)  # PID 1 of the node stops its ranks and sshd
    deadline = time.monotonic() + timeout / 2
    while any(_alive(p) for p in inits) and time.monotonic() < deadline:
        time.sleep(0.1)
    for node in state["nodes"]:
        # Killing PID 1 of a PID namespace kills every process in it.
        for pid in (node.get("init_pid"),):
            if _ours(pid, "lab.node") and _alive(pid):
                os.kill(pid, signal.SIGKILL)
        upid = node.get("unshare_pid")
        if _ours(upid, "unshare"):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(upid, signal.SIGKILL)
    deadline = time.monotonic() + timeout / 2
    for node in state["nodes"]:
        for pid in (node.get("init_pid"), node.get("unshare_pid")):
            while _alive(pid) and _ours(pid, "lab") and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid) and (_ours(pid, "lab.node") or _ours(pid, "unshare")):
                problems.append(f"{node['name']}: pid {pid} still alive")
        upid = node.get("unshare_pid")
        if upid:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(upid, os.WNOHANG)  # reap if it was our own child
    problems += slurmlab.stop(state)
    problems += raylab.stop(state)
    time.sleep(0.2)  # the kernel frees memory-cgroup charges just after the kill
    problems += cgroups.remove_all(state["lab_id"])
    if not problems:
        _state_path(state_dir).unlink(missing_ok=True)
    return problems


def rank_progress(state_dir: Path) -> dict[int, dict]:
    """rank -> {"host", "step"} from the rank logs in the state dir (last step line)."""
    out: dict[int, dict] = {}
    for log in sorted((state_dir / "nodes").glob("*/log/rank*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = STEP_RE.search(line)
            if m:
                out[int(m.group(1))] = {"host": m.group(2), "step": int(m.group(3))}
    return out


def status(state_dir: Path) -> dict:
    state_dir = state_dir.resolve()
    state = load_state(state_dir)
    if state is None:
        return {"running": False, "state_dir": str(state_dir)}
    port = int(state["options"]["port"])
    nodes = [
        {
            "name": n["name"],
            "address": n["address"],
            "init_pid": n["init_pid"],
            "alive": _alive(n["init_pid"]),
            "sshd": _port_open(n["address"], port),
        }
        for n in state["nodes"]
    ]
    return {
        "running": any(n["alive"] for n in nodes),
        "state_dir": str(state_dir),
        "scenario": state["options"]["scenario"],
        "nodes": nodes,
        "ranks": rank_progress(state_dir),
        "cgroups": state["cgroups"],
        "nodes_json": str(state_dir / "nodes.json"),
    }
