"""PID 1 of one lab node: runs inside `unshare --pid --fork --uts --mount --mount-proc`.

It gives the node its hostname and its fixed paths (/var/log/train, ~/.bashrc) through bind
mounts of per-node directories, starts the node's ranks and its sshd, keeps the ranks'
sockets open after they die (see train.hand_sockets_to_launcher), reaps children and logs
their exits like a launcher does. When it exits, the kernel kills everything in the node.

Usage (by lab.cluster only): python -m lab.node <node-config.json>
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time

LOG_DIR = "/var/log/train"
BASHRC = "/root/.bashrc"


def bind(source: str, target: str, is_dir: bool) -> None:
    if is_dir:
        os.makedirs(target, exist_ok=True)
    elif not os.path.exists(target):
        open(target, "a").close()
    subprocess.run(["mount", "--bind", source, target], check=True, timeout=10)


def launcher_log(msg: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    with open(os.path.join(LOG_DIR, "launcher.log"), "a") as f:
        f.write(f"{stamp} {msg}\n")


def exit_code(status: int) -> int:
    """Shell-style exit code: 128 + signal for a killed process (137 = SIGKILL)."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def start_rank(cfg: dict, rank_cfg: dict) -> tuple[subprocess.Popen, socket.socket]:
    ours, theirs = socket.socketpair()
    env = dict(cfg["base_env"])
    env.update(rank_cfg["env"])
    env["HANGDESK_LAB_HOLDER_FD"] = str(theirs.fileno())
    rank = rank_cfg["rank"]
    out = open(os.path.join(LOG_DIR, f"rank{rank}.log"), "ab")  # noqa: SIM115 -- for the child
    # Through the node's shell start-up file, as a job started from a login shell would be:
    # whatever the file exports reaches the rank's environment.
    cmd = ["bash", "-c", f'. {BASHRC}; exec "$@"', "rank", *rank_cfg["argv"]]
    proc = subprocess.Popen(
        cmd, env=env, stdout=out, stderr=subprocess.STDOUT, pass_fds=(theirs.fileno(),),
        cwd=cfg["workdir"], start_new_session=False,
    )  # fmt: skip
    out.close()
    theirs.close()
    if rank_cfg.get("cgroup"):
        # Only this rank goes into the small memory cgroup; pids are read in our namespace.
        with open(os.path.join(rank_cfg["cgroup"], "cgroup.procs"), "w") as f:
            f.write(str(proc.pid))
    launcher_log(f"started rank {rank} (local_rank {rank_cfg['local_rank']}) pid {proc.pid}")
    return proc, ours


def main(config_path: str) -> int:
    with open(config_path) as f:
        cfg = json.load(f)
    socket.sethostname(cfg["hostname"])
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    bind(cfg["log_dir"], LOG_DIR, is_dir=True)
    bind(cfg["bashrc"], BASHRC, is_dir=False)
    for source, target in cfg.get("binds", []):  # Slurm: the lab's /etc/slurm
        bind(source, target, is_dir=True)

    stopping = False

    def on_term(_sig, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    # The Ray lab's nodes serve SSH inside the lab's network namespace (lab/raylab.py): this
    # PID 1 listens on the node address here, and each connection gets its own `sshd -i` there.
    netns_fd = cfg.get("netns_fd")
    inetd = _ssh_listener(cfg["ssh_listen"]) if cfg.get("ssh_listen") else None
    sshd = None if inetd else subprocess.Popen([cfg["sshd"], "-D", "-e", "-f", cfg["sshd_config"]])
    ranks: dict[int, int] = {}  # pid -> rank
    holders: dict[socket.socket, int] = {}
    held_fds: list[int] = []
    for rank_cfg in cfg["ranks"]:
        proc, sock = start_rank(cfg, rank_cfg)
        ranks[proc.pid] = rank_cfg["rank"]
        holders[sock] = rank_cfg["rank"]
    # Under Slurm the ranks are slurmstepd's children, not ours: they hand their sockets in
    # over a listening Unix socket instead of an inherited one.
    listener = _holder_listener(cfg.get("holder_socket"))
    fds = (netns_fd,) if netns_fd is not None else ()
    daemon_env = {**cfg["base_env"], **cfg.get("daemon_env", {})}
    daemons = {
        subprocess.Popen(argv, env=daemon_env, pass_fds=fds).pid: _program(argv)
        for argv in cfg.get("daemons", [])
    }

    checked = time.monotonic()
    while not stopping:
        if time.monotonic() - checked > 5:
            checked = time.monotonic()
            # A lab whose state dir was deleted (e.g. pytest's old tmp dirs) stops itself,
            # so a test run killed before its teardown does not leave nodes behind forever.
            stopping = not os.path.exists(config_path)
        waiting = [*holders, *([listener] if listener else []), *([inetd] if inetd else [])]
        readable, _, _ = select.select(waiting, [], [], 0.5)
        if inetd in readable:
            readable.remove(inetd)
            _serve_ssh(inetd, cfg, fds)
        _take_sockets(readable, holders, listener, held_fds)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in ranks:
                code = exit_code(status)
                launcher_log(
                    f"rank {ranks[pid]} (pid {pid}) exited with exitcode {code}"
                    + (f" (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else "")
                )
            elif sshd is not None and pid == sshd.pid:
                launcher_log(f"sshd exited with exitcode {exit_code(status)}")
            elif pid in daemons:
                launcher_log(f"{daemons[pid]} exited with exitcode {exit_code(status)}")

    # Orderly stop: ranks and sshd first; anything left dies with this PID 1.
    for pid in ranks:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in daemons:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    if sshd is not None:
        sshd.terminate()
    return 0


def _program(argv: list[str]) -> str:
    """The daemon's own program, past an `nsenter ... --` in front of it."""
    return argv[argv.index("--") + 1] if argv[0] == "nsenter" and "--" in argv else argv[0]


def _ssh_listener(where: list) -> socket.socket:
    listening = socket.create_server((where[0], int(where[1])), backlog=64)
    listening.setblocking(False)
    return listening


def _serve_ssh(listening: socket.socket, cfg: dict, fds: tuple) -> None:
    """One SSH connection: `sshd -i` on it, inside the lab's network namespace (the fd this
    PID 1 inherited), so the session reaches what runs there (Ray's head)."""
    try:
        conn, _ = listening.accept()
    except BlockingIOError:
        return
    conn.setblocking(True)
    enter = ["nsenter", f"--net=/proc/self/fd/{fds[0]}", "--"] if fds else []
    with open(os.path.join(LOG_DIR, "sshd.log"), "ab") as err:
        subprocess.Popen(
            [*enter, cfg["sshd"], "-i", "-e", "-f", cfg["sshd_config"]],
            stdin=conn, stdout=conn, stderr=err, pass_fds=fds,
        )  # fmt: skip
    conn.close()


def _take_sockets(readable, holders: dict, listener, held_fds: list[int]) -> None:
    """Keep the fds ranks send; a new connection on the listener is a rank under Slurm."""
    for sock in readable:
        if sock is listener:
            holders[listener.accept()[0]] = -1  # the rank names itself in its message
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 64, 256)
        except OSError:
            msg, fds = b"", []
        held_fds.extend(fds)
        if not fds:
            del holders[sock]
            sock.close()
            continue
        who = holders[sock] if holders[sock] >= 0 else msg.decode(errors="replace")[4:]
        launcher_log(f"holding {len(fds)} connections of rank {who}")


def _holder_listener(path: str | None) -> socket.socket | None:
    if not path:
        return None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    return listener


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
