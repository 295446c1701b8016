"""The node farm: one process serving N virtual SSH nodes on loopback, for scale tests.

    python -m lab farm --nodes 1000 --ranks-per-node 8 [--fault rank-gone] [--slow-s 30]

Every node is an SSH server (asyncssh) on its own loopback address (127.F.x.y, one listening
socket each), with its own ed25519 host key, admitting only the farm's client key (the
console's usual pinned-key login: the node JSON carries each host key, the console refuses
any other). A session's command must be the console's (`timeout ... sh -s`); the farm reads
the script sent on stdin, tells the snapshot probe from the watch's by their first line,
takes the nonce from its shell-quoted settings, and answers with the node's captured output
renumbered (lab/farm_nodes.py). One node carries the chosen fault (farm_nodes.FAULTS).

It writes <state-dir>/farm/nodes.json (the cluster import the console takes, with
`expected`) and farm.json (its pid), says "farm: ready" on stderr, and serves until SIGTERM,
SIGINT or --lifetime. Its own CPU is reported apart, on exit and in farm.json's
`cpu_s` (rewritten every second), so a benchmark can subtract it from the machine's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import resource
import signal
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from lab import farm_nodes
from lab.addresses import loopback_run

# The first comment line of hangdesk/probe.sh and watch/probe.sh, after the settings.
SCRIPT_KIND = re.compile(rb"^# hangdesk (remote|watch) probe", re.M)
NONCE = re.compile(rb"^HD_NONCE='?([A-Za-z0-9_-]{1,64})'?$", re.M)
LOG_GLOBS = re.compile(rb"^HD_LOG_GLOBS=(''|$)", re.M)
# The console asks the probe to gzip its frames of HD_ZIP_MIN bytes or more (probelib.sh).
ZIP = re.compile(rb"^HD_ZIP='?gzip'?$", re.M)
ZIP_MIN = re.compile(rb"^HD_ZIP_MIN='?(\d{1,9})'?$", re.M)
DEFAULT_ZIP_MIN = 2048
COMMAND = re.compile(r"^timeout -k \d+ \d+ sh -s$")
MAX_SCRIPT = 1 << 20


@dataclass
class FarmOptions:
    nodes: int = 50
    ranks_per_node: int = 8
    fault: str = "rank-gone"
    slow_s: float = 30.0
    base_address: str | None = None  # 127.F.0.1 by default, F from the state dir
    port: int = 22
    state_dir: Path = Path(".lab")
    lifetime_s: float = 7200.0
    # The world the flight-recorder dumps list (0: nodes x ranks per node). A node's bytes
    # grow with it: a few nodes can send what a node of a 32,000-rank job sends.
    dump_world: int = 0


@dataclass
class Counters:
    sessions: int = 0
    probes: int = 0
    watches: int = 0
    refused: int = 0
    bytes_out: int = 0


def farm_dir(state_dir: Path) -> Path:
    return state_dir / "farm"


def addresses(opts: FarmOptions) -> list[str]:
    """One loopback address per node, skipping .0 and .255 in the last octet."""
    if opts.base_address:
        a, b, c, d = (int(x) for x in opts.base_address.split("."))
    else:
        a, b, c, d = 127, 200 + zlib.crc32(str(opts.state_dir.resolve()).encode()) % 50, 0, 1
    out = loopback_run((a, b, c, d), opts.nodes)
    if out is None:
        raise ValueError("the farm needs 127.x.y.z addresses with room for every node")
    return out


def raise_file_limit(needed: int) -> tuple[int, int]:
    """One listening socket per node, plus two descriptors per connection in flight: the
    soft limit raised to the hard one when that is short. Returns (soft, hard) in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise ValueError(f"the farm needs {needed} file descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard < 0 else hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Farm:
    def __init__(self, opts: FarmOptions) -> None:
        import asyncssh

        self.opts = opts
        self.capture = farm_nodes.Capture(farm_nodes.FAULTS[opts.fault])
        self.nodes = farm_nodes.farm_nodes(opts.fault, addresses(opts))
        self.answers = farm_nodes.NodeAnswers(
            self.capture, self.nodes, opts.ranks_per_node, dump_world=opts.dump_world
        )
        self.counters = Counters()
        self.dir = farm_dir(opts.state_dir.resolve())
        self.dir.mkdir(parents=True, exist_ok=True)
        self.client_key_path = self.dir / "id_ed25519"
        client = self._key(self.client_key_path)
        self.authorized = asyncssh.import_authorized_keys(client.export_public_key().decode())
        self.host_keys = self._host_keys()

    @staticmethod
    def _key(path: Path):
        """A key kept in the state dir, so a restarted farm keeps its identities."""
        import asyncssh

        if path.exists():
            return asyncssh.read_private_key(str(path))
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(path))
        os.chmod(path, 0o600)
        return key

    def _host_keys(self) -> list:
        """One ed25519 host key per node, all kept in one file (4,000 files would be silly)."""
        import asyncssh

        store = self.dir / "host_keys.json"
        known = json.loads(store.read_text()) if store.exists() else {}
        keys, changed = [], False
        for node in self.nodes:
            pem = known.get(node.name)
            if pem is None:
                pem = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
                known[node.name], changed = pem, True
            keys.append(asyncssh.import_private_key(pem))
        if changed:
            store.write_text(json.dumps(known))
            os.chmod(store, 0o600)
        return keys

    def node_json(self) -> dict:
        c = self.capture.meta["cluster"]
        world = len(self.nodes) * self.opts.ranks_per_node
        down = -1
        if self.opts.fault == "node-down":
            down = farm_nodes.fault_node_index(len(self.nodes))
        lines, nodes = [], []
        for node, key in zip(self.nodes, self.host_keys, strict=True):
            public = key.export_public_key().decode().split()
            host = node.address if self.opts.port == 22 else f"[{node.address}]:{self.opts.port}"
            lines.append(f"{host} {public[0]} {public[1]}")
            nodes.append({
                "name": node.name, "address": node.address, "port": self.opts.port,
                "username": "root", "key_path": str(self.client_key_path),
                "host_key": f"{public[0]} {public[1]}",
            })  # fmt: skip
        known_hosts = self.dir / "known_hosts"
        known_hosts.write_text("\n".join(lines) + "\n")
        return {
            "cluster": {
                **c,
                "name": "farm",
                "description": f"hangdesk node farm: {len(self.nodes)} nodes x "
                f"{self.opts.ranks_per_node} ranks, fault {self.opts.fault}",
                "world_size": world,
            },
            "nodes": nodes,
            "known_hosts": str(known_hosts),
            "scenario": f"farm:{self.opts.fault}",
            "mode": "farm",
            "state_dir": str(self.opts.state_dir.resolve()),
            "down_node": self.nodes[down].name if down >= 0 else "",
            "expected": farm_nodes.expected(
                self.opts.fault, self.capture, self.nodes, self.opts.slow_s
            ),
        }

    # --- serving ------------------------------------------------------------------------

    async def _answer(self, node: farm_nodes.FarmNode, process) -> None:
        """One session: the console's probe or watch script in, the node's answer out."""
        self.counters.sessions += 1
        command = process.command or ""
        if not COMMAND.match(command):
            self.counters.refused += 1
            process.stderr.write(b"farm: only the console's probe runs here\n")
            process.exit(126)
            return
        script = b""
        while len(script) <= MAX_SCRIPT:
            chunk = await process.stdin.read(65536)
            if not chunk:
                break
            script += chunk
        found = NONCE.search(script)
        nonce = found.group(1).decode() if found else "standalone"
        kind = SCRIPT_KIND.search(script)
        kind = kind.group(1) if kind else b""
        if kind == b"watch":
            self.counters.watches += 1
            answer = self.answers.watch(node, nonce, with_logs=not LOG_GLOBS.search(script))
        elif kind == b"remote":
            self.counters.probes += 1
            if node.fault and self.opts.fault == "node-slow":
                await asyncio.sleep(self.opts.slow_s)
            answer = self.answers.probe(node, nonce, zip_min=_zip_min(script))
        else:
            self.counters.refused += 1
            process.stderr.write(b"farm: unknown script\n")
            process.exit(127)
            return
        self.counters.bytes_out += len(answer)
        process.stdout.write(answer)  # one write per node; asyncssh paces it by the window
        await process.stdout.drain()
        process.exit(0)

    async def serve(self, ready: asyncio.Event | None = None) -> None:
        import asyncssh

        down = self.opts.fault == "node-down"
        f = farm_nodes.fault_node_index(len(self.nodes))
        servers = []
        for node, key in zip(self.nodes, self.host_keys, strict=True):
            if down and node.index == f:
                continue  # a node that is down: nothing listens on its address

            def factory(process, node=node):
                return self._answer(node, process)

            options = asyncssh.SSHServerConnectionOptions(
                server_host_keys=[key],
                authorized_client_keys=self.authorized,
                process_factory=factory,
                encoding=None,
                allow_pty=False,
                x11_forwarding=False,
                agent_forwarding=False,
                allow_scp=False,
                password_auth=False,
                kbdint_auth=False,
                login_timeout=30,
            )
            servers.append(
                await asyncssh.create_server(
                    asyncssh.SSHServer, node.address, self.opts.port, options=options,
                    backlog=128, reuse_address=True,
                )
            )  # fmt: skip
        if ready:
            ready.set()
        try:
            await asyncio.Event().wait()
        finally:
            for server in servers:
                server.close()


def _zip_min(script: bytes) -> int | None:
    """The size from which the probe gzips a frame when the console asks; None: plain."""
    if not ZIP.search(script):
        return None
    found = ZIP_MIN.search(script)
    return int(found.group(1)) if found else DEFAULT_ZIP_MIN


def run(opts: FarmOptions) -> int:
    """The farm in the foreground: nodes.json written, "farm: ready" on stderr, served until
    a signal or the lifetime; its CPU printed on the way out."""
    limit = raise_file_limit(opts.nodes + 256 + 4 * 256)
    farm = Farm(opts)
    info = farm.node_json()
    (farm.dir / "nodes.json").write_text(json.dumps(info, indent=2))
    state = farm.dir / "farm.json"
    started = time.monotonic()

    def write_state() -> None:
        c = farm.counters
        # Whole or not at all: a reader (RunningFarm.stats) never sees it half written.
        partial = state.with_suffix(".json.part")
        partial.write_text(json.dumps({
            "pid": os.getpid(), "nodes": len(farm.nodes), "fault": opts.fault,
            "nodes_json": str(farm.dir / "nodes.json"), "cpu_s": round(_cpu_s(), 3),
            "sessions": c.sessions, "probes": c.probes, "watches": c.watches,
            "refused": c.refused, "bytes_out": c.bytes_out, "file_limit": list(limit),
        }))  # fmt: skip
        os.replace(partial, state)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        ready = asyncio.Event()
        serving = asyncio.create_task(farm.serve(ready))
        await ready.wait()
        write_state()
        print(
            f"farm: ready: {len(farm.nodes)} nodes on {farm.nodes[0].address}.. port "
            f"{opts.port}, fault {opts.fault}, file limit {limit[0]}; "
            f"node list {farm.dir / 'nodes.json'}",
            file=sys.stderr,
            flush=True,
        )
        while not stop.is_set() and time.monotonic() - started < opts.lifetime_s:
            if serving.done():
                serving.result()  # a listener that failed to bind: say why
            try:
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            except TimeoutError:
                write_state()
        serving.cancel()

    asyncio.run(main())
    write_state()
    c = farm.counters
    print(
        f"farm: stopped: {c.sessions} sessions ({c.probes} probes, {c.watches} watch reads, "
        f"{c.refused} refused), {c.bytes_out / 1e6:.1f} MB sent, farm CPU {_cpu_s():.2f} s",
        file=sys.stderr,
    )
    return 0


# --- a farm in a child process (the benchmark's and the tests' way to run one) -------------


@dataclass
class RunningFarm:
    process: object  # subprocess.Popen
    info: dict
    state_dir: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stats(self) -> dict:
        return json.loads((farm_dir(self.state_dir) / "farm.json").read_text())

    def cpu_s(self) -> float:
        """The farm process's CPU so far, as the kernel counts it (user + system)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> str:
        """SIGTERM to the farm's own process group (it started it), SIGKILL if it lingers;
        returns what it printed on the way out."""
        import subprocess

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()
        log = farm_dir(self.state_dir) / "farm.log"
        return log.read_text() if log.exists() else ""


def launch(opts: FarmOptions, *, ready_timeout: float = 120.0) -> RunningFarm:
    """`python -m lab farm` in its own session (so only its pid is signalled), once ready."""
    import subprocess

    folder = farm_dir(opts.state_dir.resolve())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "farm.json").unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "lab", "--state-dir", str(opts.state_dir), "farm",
        "--nodes", str(opts.nodes), "--ranks-per-node", str(opts.ranks_per_node),
        "--fault", opts.fault, "--slow-s", str(opts.slow_s), "--port", str(opts.port),
        "--lifetime", str(opts.lifetime_s), "--dump-world", str(opts.dump_world),
        *(["--base-address", opts.base_address] if opts.base_address else []),
    ]  # fmt: skip
    with open(folder / "farm.log", "wb") as log:
        process = subprocess.Popen(
            command, cwd=Path(__file__).resolve().parent.parent, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    running = RunningFarm(process, {}, opts.state_dir.resolve())
    deadline = time.monotonic() + ready_timeout
    while b"farm: ready" not in (folder / "farm.log").read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            output = running.stop()
            raise RuntimeError(f"the farm did not start: {output[-2000:]}")
        time.sleep(0.1)
    running.info = json.loads((folder / "nodes.json").read_text())
    return running
