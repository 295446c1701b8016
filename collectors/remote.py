"""The SSH transport: one connection, one remote command, and nothing else.

The only module in the project that imports paramiko. `probe_node()` connects with the node's
pinned host key (anything else is refused before authentication), sends a framed script (the
probe, hangdesk/probe.sh, rendered by `hangdesk.frames.render_probe`, or any script speaking
the same frames) to `sh -s`, and reads its output under a byte cap and a deadline with
`hangdesk.frames.FrameReader` into a `ProbeRun`; a visit that cannot go on raises
`CollectionError`. What the run gave, as evidence or a typed failure, is collectors/visits.py's.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusters.sshspec import (
    PASSPHRASE_KEY_MESSAGE,
    HostKey,
    InvalidHostKey,
    NodeTarget,
    blob_fingerprint,
    parse_host_key,
    private_key_problem,
)
from hangdesk.frames import (
    FrameReader,
    frame_cap_of,
    render_probe,
)
from hangdesk.plan import CollectionPlan, KiB

from .outcomes import FailureKind, NodeFailure

if TYPE_CHECKING:  # imported where used: paramiko costs ~0.1 s, and Django loads this module
    import paramiko

# --- failures ----------------------------------------------------------------------------


class CollectionError(Exception):
    """A visit that cannot go on; ssh_visit() returns its failure, never raises it."""

    def __init__(self, kind: FailureKind, text: str) -> None:
        super().__init__(text)
        self.failure = NodeFailure(kind, text)


# --- SSH ---------------------------------------------------------------------------------


def _host_key_names(address: str, port: int) -> list[str]:
    return [address, f"[{address}]:{port}"]


# Loaded keys by file identity: a worker visiting 64 nodes at once with the same key reads
# and parses it once, not per node (a changed file has another identity and is read again).
_KEYS: dict[tuple, paramiko.PKey] = {}
_KEYS_LOCK = threading.Lock()
_KEYS_MAX = 64


def _load_client_key(key_path: str) -> paramiko.PKey:
    try:
        info = os.stat(key_path)
    except OSError:
        info = None
    if info is None or not stat.S_ISREG(info.st_mode):
        return _read_client_key(key_path)  # refused there, with its reason
    identity = (key_path, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
    with _KEYS_LOCK:
        key = _KEYS.get(identity)
    if key is None:
        key = _read_client_key(key_path)
        with _KEYS_LOCK:
            if len(_KEYS) >= _KEYS_MAX:
                _KEYS.clear()
            _KEYS[identity] = key
    return key


def _read_client_key(key_path: str) -> paramiko.PKey:
    import paramiko

    problem = private_key_problem(key_path)  # a passphrase is told before paramiko tries
    if problem is not None:
        raise CollectionError(FailureKind.AUTH, f"auth failed: private key {problem}")
    passphrase = f"auth failed: private key {key_path}: {PASSPHRASE_KEY_MESSAGE}"
    try:
        return paramiko.PKey.from_path(key_path)
    except paramiko.PasswordRequiredException as exc:
        raise CollectionError(FailureKind.AUTH, passphrase) from exc
    except TypeError as exc:  # cryptography: "password was not provided" (newer formats)
        if "password" not in str(exc).lower():
            raise
        raise CollectionError(FailureKind.AUTH, passphrase) from exc
    except (OSError, paramiko.SSHException, ValueError) as exc:
        # The message names the file and the reason; it never contains key material.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise CollectionError(
            FailureKind.AUTH, f"auth failed: cannot load private key {key_path}: {reason}"
        ) from exc


def _open_socket(target: NodeTarget, timeout: float) -> socket.socket:
    where = f"{target.address}:{target.port}"
    try:
        return socket.create_connection((target.address, target.port), timeout=timeout)
    except TimeoutError:
        text = f"unreachable: connect to {where} timed out after {timeout:g}s"
    except socket.gaierror as exc:
        text = f"unreachable: cannot resolve {target.address}: {exc}"
    except ConnectionRefusedError:
        text = f"unreachable: connection refused by {where}"
    except OSError as exc:
        text = f"unreachable: {where}: {exc.strerror or exc}"
    raise CollectionError(FailureKind.UNREACHABLE, text)


class _Watchdogs:
    """One thread for every visit's hard deadline (a thread per visit costs more than the
    visit's own reads at 64 in flight): shuts a visit's socket at its deadline so nothing
    inside paramiko can block past it."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, _Watchdog]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, watchdog: _Watchdog) -> None:
        with self._wake:
            heapq.heappush(self._due, (watchdog.deadline, next(self._order), watchdog))
            if self._thread is None or not self._thread.is_alive():
                # Started here, not at import: a forked worker process gets its own.
                self._thread = threading.Thread(target=self._run, name="ssh-watchdogs")
                self._thread.daemon = True
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while self._due and self._due[0][2].cancelled:
                    heapq.heappop(self._due)
                if not self._due:
                    self._wake.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                watchdog = heapq.heappop(self._due)[2]
            watchdog.fire()


_WATCHDOGS = _Watchdogs()


class _Watchdog:
    """Shuts the socket at the hard deadline so nothing inside paramiko can block past it."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.fired = False
        self.cancelled = False
        self.deadline = deadline
        self._sock = sock
        _WATCHDOGS.add(self)

    def fire(self) -> None:
        sock = self._sock
        if self.cancelled or sock is None:
            return
        self.fired = True
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self.cancelled, self._sock = True, None


# Ciphers in the order the collector asks for them: AEAD first (one pass per packet, where
# CTR needs a separate MAC), then what every sshd since 2014 has. Key exchange stays
# paramiko's (the post-quantum hybrid first: measured no dearer than curve25519, see
# docs/performance.md); SSH compression stays off: the probe gzips its bigger frames on the
# node, and the console stores them as they come (hangdesk.frames.Packed).
CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
)
# A bigger channel packet: fewer packets, MACs and wakeups per node's few hundred KB.
MAX_PACKET = 256 * KiB
WINDOW = 4 * 1024 * KiB


def _transport(sock, **kwargs) -> paramiko.Transport:
    import paramiko

    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    options.ciphers = [c for c in CIPHERS if c in options.ciphers] or options.ciphers
    return transport


def _connect(
    target: NodeTarget, plan: CollectionPlan, sock: socket.socket, host_key: HostKey
) -> paramiko.SSHClient:
    import paramiko

    pkey = _load_client_key(target.key_path) if target.key_path is not None else None
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    pinned = paramiko.PKey.from_type_string(host_key.key_type, host_key.blob)
    for name in _host_key_names(target.address, target.port):
        client.get_host_keys().add(name, pinned.get_name(), pinned)
    timeout = plan.connect_timeout_s
    started = time.monotonic()
    try:
        client.connect(
            hostname=target.address,
            port=target.port,
            username=target.username,
            pkey=pkey,
            sock=sock,
            look_for_keys=False,
            allow_agent=target.key_path is None,
            # Whole handshake; longer than the banner wait so a silent server is named as such.
            timeout=2 * timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            channel_timeout=timeout,
            transport_factory=_transport,
        )
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise CollectionError(
            FailureKind.HOST_KEY,
            f"host key mismatch: expected {host_key.fingerprint}, "
            f"got {blob_fingerprint(exc.key.asbytes())} ({exc.key.get_name()})",
        ) from exc
    except paramiko.AuthenticationException as exc:
        client.close()
        raise _auth_failure(exc, target, timeout) from exc
    except paramiko.SSHException as exc:
        client.close()
        raise _ssh_failure(str(exc), target, timeout, time.monotonic() - started) from exc
    except (OSError, EOFError) as exc:
        client.close()
        raise CollectionError(
            FailureKind.CONNECTION_LOST,
            f"connection lost: during SSH handshake: {exc or type(exc).__name__}",
        ) from exc
    return client


def _auth_failure(exc: Exception, target: NodeTarget, timeout: float) -> CollectionError:
    """A refused key is final; an answer that did not come in time (paramiko's
    "Authentication timeout.": an sshd too busy to answer, many visits at once) is not a
    refusal: unreachable, so the visit is tried again."""
    if str(exc).strip().lower() == "authentication timeout.":
        return CollectionError(
            FailureKind.UNREACHABLE,
            f"unreachable: {target.address}:{target.port} did not answer the login within "
            f"{timeout:g}s",
        )
    return CollectionError(FailureKind.AUTH, f"auth failed: {target.username}@{target.name}: {exc}")


def _ssh_failure(
    message: str, target: NodeTarget, timeout: float, elapsed: float
) -> CollectionError:
    where = f"{target.address}:{target.port}"
    if "banner" in message and elapsed < 0.9 * timeout:
        # Not a silent server: the port accepted and hung up (a proxy or forwarder with
        # nothing behind it, sshd's MaxStartups, a TCP wrapper), as fast as a refusal.
        return CollectionError(
            FailureKind.UNREACHABLE,
            f"unreachable: {where} accepted the connection and closed it after "
            f"{elapsed:.1f}s without an SSH banner (is sshd behind that port?)",
        )
    if "banner" in message:
        return CollectionError(
            FailureKind.UNREACHABLE, f"unreachable: no SSH banner from {where} within {timeout:g}s"
        )
    if "Indecipherable protocol version" in message:
        return CollectionError(
            FailureKind.UNREACHABLE, f"unreachable: {where} answers, but not as an SSH server"
        )
    if "No existing session" in message:  # start_client gave up waiting for key exchange
        return CollectionError(
            FailureKind.UNREACHABLE,
            f"unreachable: SSH handshake with {where} did not finish within {2 * timeout:g}s",
        )
    if "No authentication methods available" in message:
        return CollectionError(
            FailureKind.AUTH,
            f"auth failed: {target.username}@{target.name}: no key_path and no key in the "
            "ssh-agent",
        )
    if "known_hosts" in message:
        return CollectionError(FailureKind.HOST_KEY, f"host key rejected: {message}")
    return CollectionError(FailureKind.SSH_ERROR, f"ssh error: {message}")


@dataclass
class ProbeRun:
    reader: FrameReader
    exit_status: int | None = None
    stderr: bytes = b""
    stopped: str | None = None  # why reading stopped before the end of the output
    lost: bool = False  # ... because the connection broke
    out_of_time: bool = False  # ... because the time budget ran out
    remote_budget: int = 0  # seconds the node's `timeout` grants the probe

    def stop_out_of_time(self, plan: CollectionPlan) -> None:
        self.stopped, self.out_of_time = f"time budget of {plan.total_timeout_s:g}s used up", True


def _run_probe(
    client: paramiko.SSHClient,
    plan: CollectionPlan,
    deadline: float,
    watchdog: _Watchdog,
    render: Callable[[str], bytes] | None = None,
) -> ProbeRun:
    import paramiko

    nonce = secrets.token_hex(8)
    run = ProbeRun(
        FrameReader(
            nonce,
            frame_cap=frame_cap_of(plan),
            total_cap=plan.max_total_bytes,
        )
    )
    # The remote side stops itself first (with `timeout -k 2`), leaving time to ship results.
    margin = min(3.0, plan.total_timeout_s * 0.2)
    remote_budget = run.remote_budget = max(1, math.floor(deadline - time.monotonic() - margin - 2))
    stderr = bytearray()
    try:
        transport = client.get_transport()
        assert transport is not None
        channel = transport.open_session(
            window_size=WINDOW,
            max_packet_size=MAX_PACKET,
            timeout=max(0.1, deadline - time.monotonic()),
        )
        channel.settimeout(max(0.1, deadline - time.monotonic()))
        channel.exec_command(f"timeout -k 2 {remote_budget} sh -s")
        script = render(nonce) if render else render_probe(plan, nonce=nonce, packed=True)
        channel.sendall(script)
        channel.shutdown_write()
        channel.settimeout(0.25)  # short reads, so the deadline is checked often
        _read_output(channel, run, plan, deadline, watchdog, stderr)
        _drain_stderr(channel, stderr)
        wait_until = min(deadline, time.monotonic() + 2)
        while run.stopped is None and not channel.exit_status_ready():
            if time.monotonic() >= wait_until:
                break
            time.sleep(0.02)
        if channel.exit_status_ready():
            run.exit_status = channel.recv_exit_status()
        channel.close()
    except (OSError, EOFError, paramiko.SSHException) as exc:
        if watchdog.fired:
            run.stop_out_of_time(plan)
        else:
            run.stopped, run.lost = f"connection lost: {exc or type(exc).__name__}", True
    run.stderr = bytes(stderr)
    return run


def _read_output(channel, run: ProbeRun, plan, deadline, watchdog, stderr: bytearray) -> None:
    """Feed the channel's output to the run's reader until it ends, the deadline passes, the
    socket is shut under us (the watchdog), or the reader stops (over its cap, a bad frame)."""
    while True:
        _drain_stderr(channel, stderr)
        if time.monotonic() >= deadline:
            run.stop_out_of_time(plan)
            return
        try:
            data = channel.recv(256 * KiB)
        except TimeoutError:
            continue
        if not data:
            if watchdog.fired:  # the socket was shut under us: EOF, not the real end
                run.stop_out_of_time(plan)
            return
        run.reader.feed(data)
        if run.reader.over_cap:
            run.stopped = f"output cut at {plan.max_total_bytes} bytes"
            return
        if run.reader.error:
            run.stopped = run.reader.error
            return


def _drain_stderr(channel, stderr: bytearray) -> None:
    """What the node wrote on stderr so far, its first 8 KiB kept."""
    while channel.recv_stderr_ready():
        stderr += channel.recv_stderr(64 * KiB)[: max(0, 8 * KiB - len(stderr))]


def probe_node(
    target: NodeTarget,
    plan: CollectionPlan,
    deadline: float,
    render: Callable[[str], bytes] | None = None,
) -> ProbeRun:
    """Connect and run the probe (or the script `render(nonce)` gives, which must speak the
    same frames); raises CollectionError when there is nothing to read."""
    try:
        plan.validate()
    except ValueError as exc:
        raise CollectionError(FailureKind.INVALID_PLAN, f"invalid plan: {exc}") from exc
    try:
        host_key = parse_host_key(target.host_key)
    except InvalidHostKey as exc:
        raise CollectionError(FailureKind.HOST_KEY, f"host key invalid: {exc}") from exc
    sock = _open_socket(target, min(plan.connect_timeout_s, plan.total_timeout_s))
    # A little after the deadline, so the read loop normally stops first and cleanly.
    watchdog = _Watchdog(sock, deadline + 0.5)
    client: paramiko.SSHClient | None = None
    try:
        client = _connect(target, plan, sock, host_key)
        return _run_probe(client, plan, deadline, watchdog, render)
    except CollectionError as exc:
        if watchdog.fired and exc.failure.transient:
            raise CollectionError(
                FailureKind.UNREACHABLE,
                f"unreachable: no answer within the {plan.total_timeout_s:g}s time budget",
            ) from exc
        raise
    finally:
        watchdog.cancel()
        if client is not None:
            client.close()
        sock.close()
